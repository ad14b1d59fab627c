package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChangedIsClosedByTheNextCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ch := b.s.Changed()
	select {
	case <-ch:
		t.Fatal("closed before anything committed")
	default:
	}
	require.True(t, ch == b.s.Changed(), "watchers before a commit share one channel")
	task := b.submit(t, plainSteps("a"))
	select {
	case <-ch:
	default:
		t.Fatal("a submission did not wake the watcher")
	}
	next := b.s.Changed()
	select {
	case <-next:
		t.Fatal("the next channel is closed before the next commit")
	default:
	}
	b.done(t, b.claim1(t, "w"), `{}`)
	<-next
	_ = task
}
