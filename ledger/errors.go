package ledger

import "errors"

// Errors returned by the ledger.
var (
	// ErrNotFound: no task (or unit, or output) with that id.
	ErrNotFound = errors.New("not found")
	// ErrLeaseLost: the lease presented is not the unit's current lease (it
	// expired and was taken over, the unit was reset by a repair, or the task
	// was cancelled). The caller's work must be thrown away.
	ErrLeaseLost = errors.New("lease lost")
	// ErrTerminal: the task already succeeded, failed or was cancelled.
	ErrTerminal = errors.New("task is finished")
	// ErrStoreFailed: a disk sync failed. The kernel may have dropped the
	// data it could not write, so nothing written since the previous sync
	// can be trusted to be on disk, nor to be absent: the store refuses
	// every later write and must be reopened (the reopened store reads what
	// really is on disk). Reads still work.
	ErrStoreFailed = errors.New("store failed")
	// ErrReadOnly: the store was opened read-only.
	ErrReadOnly = errors.New("store is read-only")
	// ErrInUse: another process has the store open (Badger's directory
	// lock). Only one process may open a store for writing.
	ErrInUse = errors.New("store is in use by another process")
)

// ErrNoSpace: the file system holding the store has less free space than
// the floor (Options.MinFreeBytes). Writes are refused; reads still work.
var ErrNoSpace = errors.New("no space left on device")

// ErrTooLarge: a read would assemble more bytes than its caller allows.
var ErrTooLarge = errors.New("too large")

// ErrUnavailable: a networked store's database could not be reached, or
// went away in the middle of an operation (a restart, a cut network).
// What the operation wanted may or may not have happened; the records say
// which once the database is back. A worker gives such a unit back
// instead of failing it.
var ErrUnavailable = errors.New("store unavailable")

// ErrDelivering: another process of a shared store is delivering the
// notification now (Effect.Sender); it is not sent from here meanwhile.
var ErrDelivering = errors.New("another process is delivering the notification")
