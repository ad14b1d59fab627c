package kv

import (
	"bytes"
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/lhengine/lhengine/ledger"
)

// Backend is the database under the records: an ordered map of byte keys to
// byte values with transactions that see one consistent snapshot. Badger is
// one (the embedded store), PostgreSQL another (a table of keys and values,
// ../../postgres). Everything above it (the key layout, the records, the
// lease protocol) is the same for both.
type Backend interface {
	// Begin starts a transaction: read-write when rw (run by the store's
	// group-commit leader), else a read-only view of one snapshot.
	Begin(rw bool) (Txn, error)
}

// Txn is one transaction of a Backend.
type Txn interface {
	// Get calls fn with the value at key (valid only during fn) and the
	// version of the record: a number that changes whenever the key is
	// written (0: unknown, a write of this transaction). A key with no
	// value is ledger.ErrNotFound.
	Get(key []byte, fn func(val []byte, version uint64) error) error
	// Set writes val at key; Delete deletes key.
	Set(key, val []byte) error
	Delete(key []byte) error
	// Iterate walks the keys under o.Prefix in order (reverse order when
	// o.Reverse).
	Iterate(o IterOptions) Iterator
	// Commit commits a read-write transaction; Discard ends one that did not
	// commit (a no-op after Commit).
	Commit() error
	Discard()
}

// IterOptions say what an Iterator walks.
type IterOptions struct {
	Prefix   []byte
	Reverse  bool
	KeysOnly bool // values are not needed (Value may still read them)
	Prefetch int  // how many records to read ahead; 0: the backend's default
}

// Iterator walks keys in order. Key and Value are valid until the next call
// to Next, Seek or Rewind.
type Iterator interface {
	// Rewind moves to the first key under the prefix (the last, reversed).
	Rewind()
	// Seek moves to the first key at or after key (at or before, reversed).
	Seek(key []byte)
	// Valid reports whether the iterator is at a key under the prefix.
	Valid() bool
	Next()
	Key() []byte
	// Value calls fn with the value of the current key.
	Value(fn func([]byte) error) error
	// ValueSize is the size of the current value.
	ValueSize() int64
	// Version is the current record's version (see Txn.Get).
	Version() uint64
	// Err is the error that ended the walk early (a failed read), or nil.
	Err() error
	Close()
}

// ErrTxnTooBig is a transaction larger than the backend takes at once:
// the caller splits the work into smaller transactions.
var ErrTxnTooBig = badger.ErrTxnTooBig

// badgerBackend is a Backend on a Badger database.
type badgerBackend struct{ db *badger.DB }

func (b badgerBackend) Begin(rw bool) (Txn, error) {
	return badgerTxn{b.db.NewTransaction(rw)}, nil
}

// badgerTxn is a Txn on a Badger transaction.
type badgerTxn struct{ txn *badger.Txn }

func (t badgerTxn) Get(key []byte, fn func([]byte, uint64) error) error {
	item, err := t.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return ledger.ErrNotFound
	}
	if err != nil {
		return err
	}
	return ItemValue(item, func(v []byte) error { return fn(v, item.Version()) })
}

func (t badgerTxn) Set(key, val []byte) error { return t.txn.Set(key, val) }
func (t badgerTxn) Delete(key []byte) error   { return t.txn.Delete(key) }
func (t badgerTxn) Commit() error             { return t.txn.Commit() }
func (t badgerTxn) Discard()                  { t.txn.Discard() }

func (t badgerTxn) Iterate(o IterOptions) Iterator {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = o.Prefix
	opts.Reverse = o.Reverse
	opts.PrefetchValues = !o.KeysOnly
	if o.Prefetch > 0 {
		opts.PrefetchSize = o.Prefetch
	}
	return &badgerIter{it: t.txn.NewIterator(opts), prefix: o.Prefix, reverse: o.Reverse}
}

// badgerIter is an Iterator on a Badger iterator.
type badgerIter struct {
	it      *badger.Iterator
	prefix  []byte
	reverse bool
}

// Rewind: Badger's own, walking backwards, starts at the last key of the
// whole database, which is not under the prefix unless the prefix is the
// last one; so it seeks to the first key after the prefix's keys, and
// steps back from it when there is one.
func (i *badgerIter) Rewind() {
	upper := UpperBound(i.prefix)
	if !i.reverse || upper == nil {
		i.it.Rewind()
		return
	}
	i.it.Seek(upper)
	if i.it.Valid() && bytes.Equal(i.it.Item().Key(), upper) {
		i.it.Next()
	}
}

// UpperBound is the first key after every key that starts with prefix
// (nil: none, the prefix is empty or all 0xff).
func UpperBound(prefix []byte) []byte {
	u := bytes.Clone(prefix)
	for i := len(u) - 1; i >= 0; i-- {
		if u[i] < 0xff {
			u[i]++
			return u[:i+1]
		}
	}
	return nil
}

func (i *badgerIter) Seek(key []byte)  { i.it.Seek(key) }
func (i *badgerIter) Valid() bool      { return i.it.ValidForPrefix(i.prefix) }
func (i *badgerIter) Next()            { i.it.Next() }
func (i *badgerIter) Key() []byte      { return i.it.Item().Key() }
func (i *badgerIter) ValueSize() int64 { return i.it.Item().ValueSize() }
func (i *badgerIter) Version() uint64  { return i.it.Item().Version() }
func (i *badgerIter) Err() error       { return nil }
func (i *badgerIter) Close()           { i.it.Close() }

func (i *badgerIter) Value(fn func([]byte) error) error { return ItemValue(i.it.Item(), fn) }
