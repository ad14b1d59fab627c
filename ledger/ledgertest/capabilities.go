package ledgertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
)

// Capabilities, models, notifications and retention.

var _ = register("ArtifactsAreContentAddressedChunkedAndCharged", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a"))
	other := b.submit(steps("a"))
	big := bytes.Repeat([]byte("0123456789abcdef"), 2*ledger.ArtifactChunk/16+7) // 2 chunks and a bit
	p := ledger.Provenance{Name: "big.bin", Task: task.ID, Step: "a", Attempt: 1}
	ref, err := b.s.PutArtifact(b.ctx, p, big, 1<<30)
	require.NoError(t, err)
	p.Attempt = 2
	again, err := b.s.PutArtifact(b.ctx, p, big, 1<<30)
	require.NoError(t, err)
	require.Equal(t, ref, again, "the same content has the same ref")

	got := make([]byte, 0, len(big))
	buf := make([]byte, 300_000)
	for off := int64(0); ; {
		n, size, err := b.s.ReadArtifact(ref, off, buf)
		require.NoError(t, err)
		require.Equal(t, int64(len(big)), size)
		if n == 0 {
			break
		}
		got = append(got, buf[:n]...)
		off += int64(n)
	}
	require.Equal(t, big, got)

	owns, err := b.s.OwnsArtifact(task.ID, ref)
	require.NoError(t, err)
	require.True(t, owns)
	owns, err = b.s.OwnsArtifact(other.ID, ref)
	require.NoError(t, err)
	require.False(t, owns, "a task reads only the artifacts it stored")
	_, err = b.s.PutArtifact(b.ctx, ledger.Provenance{Name: "x", Task: other.ID, Step: "a"}, big, int64(len(big))-1)
	require.ErrorIs(t, err, ledger.ErrQuota, "another task storing the same content is charged for it")

	b.read(func(r ledger.Reader) error {
		ps, err := r.Artifacts(task.ID)
		require.NoError(t, err)
		require.Len(t, ps, 1, "a retry's record replaces the first")
		require.Equal(t, 2, ps[0].Attempt)
		u, err := r.Usage(task.ID)
		require.NoError(t, err)
		require.Equal(t, int64(len(big)), u.Artifacts)
		return nil
	})
})

var _ = register("KVEntriesNeedTheCurrentLeaseAndAQuota", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a"))
	zombie := b.claim1("w1")
	require.NoError(t, b.s.KVPut(b.ctx, zombie, "cursor", json.RawMessage(`5`), 10))
	err := b.s.KVPut(b.ctx, zombie, "big", json.RawMessage(`"0123456789"`), 10)
	var qe *ledger.QuotaError
	require.ErrorAs(t, err, &qe)
	require.ErrorIs(t, err, ledger.ErrQuota)
	_, found, err := b.s.KVGet(task.ID, 0, 0, "big")
	require.NoError(t, err)
	require.False(t, found, "a refused entry is not written")

	b.clock.Add(time.Minute)
	fresh := b.claim1("w2")
	require.ErrorIs(t, b.s.KVPut(b.ctx, zombie, "cursor", json.RawMessage(`9`), 64<<20), ledger.ErrLeaseLost)
	v, ok, err := b.s.KVGet(fresh.Task, 0, 0, "cursor")
	require.NoError(t, err)
	require.True(t, ok)
	require.JSONEq(t, `5`, string(v), "the next attempt resumes from what its predecessor saved")
})

var _ = register("TheEffectJournalKeepsIntentAndOutcome", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("send"))
	l := b.claim1("w")
	idem := ledger.IdempotencyKey(task.ID, "send", 0, "mail-1")
	e := &ledger.Effect{Task: task.ID, Step: 0, StepName: "send", Key: "mail-1", Kind: "http", Mode: "idempotent",
		IdempotencyKey: idem, Request: json.RawMessage(`{"to":"a"}`), State: ledger.EffectIntent, Attempt: l.Attempt}
	require.NoError(t, b.s.RecordEffect(b.ctx, l, e))
	got, err := b.s.Effect(task.ID, 0, 0, "mail-1")
	require.NoError(t, err)
	require.Equal(t, ledger.EffectIntent, got.State)
	done := *e
	done.State, done.Outcome = ledger.EffectDone, json.RawMessage(`{"status":200}`)
	require.NoError(t, b.s.RecordEffect(b.ctx, l, &done))
	got, err = b.s.Effect(task.ID, 0, 0, "mail-1")
	require.NoError(t, err)
	require.Equal(t, ledger.EffectDone, got.State)
	require.JSONEq(t, `{"status":200}`, string(got.Outcome))
	zombie := l
	zombie.Epoch++
	require.ErrorIs(t, b.s.RecordEffect(b.ctx, zombie, e), ledger.ErrLeaseLost)
	_, err = b.s.Effect(task.ID, 0, 0, "mail-2")
	require.ErrorIs(t, err, ledger.ErrNotFound)
})

var _ = register("AnUnknownEffectWaitsForAPerson", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("send"))
	l := b.claim1("w")
	e := &ledger.Effect{Task: task.ID, Step: 0, StepName: "send", Key: "mail-1", Kind: "http", Mode: "manual",
		IdempotencyKey: ledger.IdempotencyKey(task.ID, "send", 0, "mail-1"), State: ledger.EffectUnknown, Attempt: l.Attempt}
	require.NoError(t, b.s.RecordEffect(b.ctx, l, e))
	got, err := b.s.WaitEffect(b.ctx, l, "mail-1", "did the mail go out?")
	require.NoError(t, err)
	require.Equal(t, ledger.Paused, got.Status, "nothing else of the task can run")
	require.Empty(t, b.claim("w", 1).Leases)
	_, err = b.s.ResolveEffect(b.ctx, task.ID, 0, 0, "mail-1", true, "it did")
	require.NoError(t, err)
	again := b.claim1("w")
	eff, err := b.s.Effect(task.ID, 0, 0, "mail-1")
	require.NoError(t, err)
	require.Equal(t, ledger.EffectDone, eff.State, "confirmed: never performed again")
	require.Equal(t, ledger.Succeeded, b.done(again, `1`).Status)
})

var _ = register("CountsAndNotesCommitOnlyWithASuccess", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a"))
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: b.claim1("w"), Failure: &ledger.Failure{Kind: fault.Trap, Message: "x"}, RetryAt: b.clock.Now(),
		Counts: map[string]int64{"pages": 5}, Notes: []ledger.Note{{Kind: ledger.NoteFinding, Text: "lost"}}})
	require.NoError(t, err)
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: b.claim1("w"), Output: json.RawMessage(`1`),
		Counts: map[string]int64{"pages": 5}, Notes: []ledger.Note{{Kind: ledger.NoteFinding, Text: "a"}, {Kind: ledger.NoteDecision, Text: "kept"}}})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"pages": 5}, got.Counters)
	b.read(func(r ledger.Reader) error {
		notes, err := r.Notes(task.ID)
		require.NoError(t, err)
		require.Len(t, notes, 2)
		require.Equal(t, "kept", notes[1].Text)
		page, next, err := r.NotesPage(task.ID, ledger.NoteQuery{Kind: ledger.NoteDecision})
		require.NoError(t, err)
		require.Len(t, page, 1)
		require.Zero(t, next)
		return nil
	})
})

var _ = register("CompactionKeepsProtectedNotes", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a", "b"))
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: b.claim1("w"), Output: json.RawMessage(`1`),
		Notes: []ledger.Note{{Kind: ledger.NoteFinding, Text: "f1"}, {Kind: ledger.NoteFinding, Text: "f2"}, {Kind: ledger.NoteDecision, Text: "d"}}})
	require.NoError(t, err)
	var notes []ledger.Note
	b.read(func(r ledger.Reader) (err error) { notes, err = r.Notes(task.ID); return err })
	require.Len(t, notes, 3)
	l := b.claim1("w")
	_, err = b.s.CompactNotes(b.ctx, l, []uint64{notes[0].Seq, notes[2].Seq}, "all")
	require.ErrorIs(t, err, ledger.ErrProtected, "a decision is never compacted away")
	seq, err := b.s.CompactNotes(b.ctx, l, []uint64{notes[0].Seq, notes[1].Seq}, "two findings")
	require.NoError(t, err)
	_, err = b.s.CompactNotes(b.ctx, l, []uint64{notes[0].Seq}, "again")
	require.ErrorIs(t, err, ledger.ErrNotFound, "a note is replaced once")
	b.read(func(r ledger.Reader) error {
		open, err := r.OpenNotes(task.ID, -1, 100)
		require.NoError(t, err)
		var texts []string
		for _, n := range open {
			texts = append(texts, n.Text)
		}
		require.Equal(t, []string{"two findings"}, texts, "open notes: neither protected nor replaced")
		for _, n := range open {
			if n.Text == "two findings" {
				require.Equal(t, seq, n.Seq)
			}
		}
		return nil
	})
})

var _ = register("TheModelJournalAnswersAndCountsOnce", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("think"))
	l := b.claim1("w")
	call := func(key string) *ledger.ModelCall {
		return &ledger.ModelCall{Task: task.ID, Step: 0, StepName: "think", Item: l.Item, Key: key, RequestSHA256: "aa",
			Model: "m", Provider: "openai", ModelID: "id", Attempt: l.Attempt, RequestBytes: 300, MaxCost: 0.25}
	}
	prior, err := b.s.StartModelCall(b.ctx, l, call("turn-1"))
	require.NoError(t, err)
	require.Nil(t, prior)
	_, err = b.s.ModelCall(task.ID, 0, l.Item, "turn-1", "aa")
	require.ErrorIs(t, err, ledger.ErrNotFound, "an intent is not a response")

	prior, err = b.s.StartModelCall(b.ctx, l, call("turn-1"))
	require.NoError(t, err)
	require.Nil(t, prior)
	require.EqualValues(t, 1, b.task(task.ID).ModelUsage.PossiblyBilled.Calls, "an intent found without a response is possibly billed")

	c := call("turn-1")
	c.Response, c.InputTokens, c.OutputTokens, c.Cost = json.RawMessage(`{"text":"hi"}`), 10, 4, 0.5
	_, fresh, err := b.s.RecordModelCall(b.ctx, l, c)
	require.NoError(t, err)
	require.True(t, fresh)
	_, fresh, err = b.s.RecordModelCall(b.ctx, l, c)
	require.NoError(t, err)
	require.False(t, fresh, "recorded already: nothing charged")
	prior, err = b.s.StartModelCall(b.ctx, l, call("turn-1"))
	require.NoError(t, err)
	require.NotNil(t, prior, "answered already: answered from the journal")
	require.JSONEq(t, `{"text":"hi"}`, string(prior.Response))
	usage := b.task(task.ID).ModelUsage
	require.EqualValues(t, 1, usage.Calls)
	require.Equal(t, 0.5, usage.Cost)

	zombie := l
	zombie.Epoch++
	_, _, err = b.s.RecordModelCall(b.ctx, zombie, call("turn-2"))
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
})

var _ = register("ModulesAreStoredWithTheTask", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	wasm := []byte("\x00asm\x01\x00\x00\x00 a module")
	h := sha256.Sum256(wasm)
	sum := hex.EncodeToString(h[:])
	m := ledger.Manifest{Plugins: map[string]ledger.PluginPin{"a": {Path: "a.wasm", SHA256: sum}}}
	_, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps("a"), Manifest: m, Modules: map[string][]byte{"ff" + sum[2:]: wasm}})
	require.Error(t, err, "bytes that do not have the pinned sum are refused")
	_, _, err = b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps("a"), Manifest: m, Modules: map[string][]byte{sum: wasm}})
	require.NoError(t, err)
	got, err := b.s.Module(sum)
	require.NoError(t, err)
	require.Equal(t, wasm, got)
	_, err = b.s.Module("ff" + sum[2:])
	require.ErrorIs(t, err, ledger.ErrNotFound)
})

var _ = register("TheNotifyOutboxIsWrittenWithItsEvent", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	spec := &ledger.NotifySpec{URL: "http://127.0.0.1:1/hook", Events: []ledger.EventType{ledger.EvSucceeded}}
	task, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "notified", Steps: steps("a"), Notify: spec})
	require.NoError(t, err)
	changed := b.s.NotificationsChanged()
	b.done(b.claim1("w"), `{}`)
	<-changed
	ns, err := b.s.PendingNotifications(10, nil)
	require.NoError(t, err)
	require.Len(t, ns, 1)
	require.Equal(t, task.ID, ns[0].Task)
	require.Equal(t, ledger.EvSucceeded, ns[0].Event.Type)
	n := ns[0]
	_, err = b.s.NotifyIntent(b.ctx, &n)
	require.NoError(t, err)
	require.NoError(t, b.s.NotifyOutcome(b.ctx, &n, json.RawMessage(`{"status":204}`), ""))
	ns, err = b.s.PendingNotifications(10, nil)
	require.NoError(t, err)
	require.Empty(t, ns, "a delivered notification is sent once")
})

var _ = register("RemoveDeletesAFinishedTaskOnly", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps("a"), IdempotencyKey: "key-1"})
	require.NoError(t, err)
	keep := b.submit(steps("a"))
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 1, LeaseFor: time.Minute, Task: task.ID})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)
	l := c.Leases[0]
	ref, err := b.s.PutArtifact(b.ctx, ledger.Provenance{Name: "a.txt", Task: l.Task, Step: "a", Attempt: 1}, []byte("hello"), 1<<20)
	require.NoError(t, err)
	err = b.s.Remove(b.ctx, task.ID)
	var nf *ledger.NotFinishedError
	require.ErrorAs(t, err, &nf, "a task that may still run is not removed")
	require.ErrorIs(t, b.s.Remove(b.ctx, "01NOSUCHTASK0000000000000A"), ledger.ErrNotFound)
	b.done(l, `1`)
	require.NoError(t, b.s.Remove(b.ctx, task.ID))
	_, err = b.s.Task(b.ctx, task.ID)
	require.ErrorIs(t, err, ledger.ErrNotFound)
	require.Equal(t, ledger.Queued, b.task(keep.ID).Status, "another task is untouched")
	_, err = b.s.GC(b.ctx)
	require.NoError(t, err)
	_, _, err = b.s.ReadArtifact(ref, 0, make([]byte, 8))
	require.ErrorIs(t, err, ledger.ErrNotFound, "GC deleted the artifact no task refers to")
	again, created, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps("a"), IdempotencyKey: "key-1"})
	require.NoError(t, err)
	require.True(t, created, "the idempotency key is free again")
	require.NotEqual(t, task.ID, again.ID)
})
