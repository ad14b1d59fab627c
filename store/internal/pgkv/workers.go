package pgkv

import (
	"context"
	"fmt"
	"time"
)

// Worker is a process's registration in the store: who works it.
type Worker struct {
	Session  string
	Host     string
	PID      int
	Version  string
	Started  time.Time
	LastSeen time.Time
	Stopped  time.Time // zero while it runs
}

// Register records w (its session, host, pid, version, started and last
// seen times) and forgets the registrations that stopped, or were last
// seen, before forget.
func (b *Backend) Register(ctx context.Context, w Worker, forget time.Time) error {
	_, err := b.pool.Exec(ctx, `INSERT INTO lhengine_workers (session, host, pid, version, started, last_seen)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (session) DO UPDATE SET last_seen = EXCLUDED.last_seen, stopped = NULL`,
		w.Session, w.Host, w.PID, w.Version, w.Started, w.LastSeen)
	if err != nil {
		return fmt.Errorf("register this process in the store: %w", err)
	}
	_, err = b.pool.Exec(ctx, `DELETE FROM lhengine_workers WHERE coalesce(stopped, last_seen) < $1`, forget)
	return err
}

// Seen records that session was alive at now.
func (b *Backend) Seen(ctx context.Context, session string, now time.Time) error {
	_, err := b.pool.Exec(ctx, `UPDATE lhengine_workers SET last_seen = $2 WHERE session = $1`, session, now)
	return err
}

// Stopped records that session stopped at now: its leases are dead.
func (b *Backend) Stopped(ctx context.Context, session string, now time.Time) error {
	_, err := b.pool.Exec(ctx, `UPDATE lhengine_workers SET stopped = $2, last_seen = $2 WHERE session = $1`, session, now)
	return err
}

// Workers lists the registrations, the earliest started first.
func (b *Backend) Workers(ctx context.Context) ([]Worker, error) {
	rows, err := b.pool.Query(ctx, `SELECT session, host, pid, version, started, last_seen, stopped
		FROM lhengine_workers ORDER BY started, session`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Worker
	for rows.Next() {
		var w Worker
		var stopped *time.Time
		if err := rows.Scan(&w.Session, &w.Host, &w.PID, &w.Version, &w.Started, &w.LastSeen, &stopped); err != nil {
			return nil, err
		}
		if stopped != nil {
			w.Stopped = *stopped
		}
		out = append(out, w)
	}
	return out, rows.Err()
}
