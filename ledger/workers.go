package ledger

import (
	"context"
	"time"
)

// Worker is a process registered in a store that many processes share
// (PostgreSQL): who works it, from where, and whether it still runs.
type Worker struct {
	Session  string    `json:"session"` // the store session its lease owners start with
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Version  string    `json:"version"`
	Started  time.Time `json:"started"`
	LastSeen time.Time `json:"last_seen"`
	Stopped  time.Time `json:"stopped,omitzero"` // zero while it runs
	// Alive: it has not stopped and was seen recently (its leases hold
	// until they expire); a process that is not alive has its leases
	// taken back at the next claim.
	Alive bool `json:"alive"`
	This  bool `json:"this"` // the process that answered
}

// Registry is what a store shared by many processes says of them: a
// store that one process has open at a time (the embedded one) has none.
type Registry interface {
	// Workers lists the processes registered, the earliest started first.
	Workers(ctx context.Context) ([]Worker, error)
}
