// Package mailsink is an HTTP receiver that dedupes by Idempotency-Key, the
// way a real mail or payment API does. Tests use it to count, per key, how
// many requests arrived and whether the effect was applied.
package mailsink

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// Sink is an http.Handler: POST /mail applies a message once per
// Idempotency-Key; GET /applied?key=K says whether K was applied; GET /stats
// returns the counts.
type Sink struct {
	mu       sync.Mutex
	received map[string]int
	applied  map[string]string // key -> body of the message applied
}

// New returns an empty sink.
func New() *Sink { return &Sink{received: map[string]int{}, applied: map[string]string{}} }

// Stats is what the sink saw.
type Stats struct {
	Received map[string]int    `json:"received"` // requests per key, duplicates included
	Applied  map[string]string `json:"applied"`  // key -> message, once
}

// Stats returns a copy of the counts.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Received: map[string]int{}, Applied: map[string]string{}}
	for k, v := range s.received {
		st.Received[k] = v
	}
	for k, v := range s.applied {
		st.Applied[k] = v
	}
	return st
}

func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/mail":
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			http.Error(w, "Idempotency-Key required", http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		s.mu.Lock()
		s.received[key]++
		_, dup := s.applied[key]
		if !dup {
			s.applied[key] = string(body)
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"queued": true, "duplicate": dup})
	case r.Method == http.MethodGet && r.URL.Path == "/applied":
		s.mu.Lock()
		_, ok := s.applied[r.URL.Query().Get("key")]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodGet && r.URL.Path == "/stats":
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.Stats())
	default:
		http.NotFound(w, r)
	}
}
