package store

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/lease"
)

// Window steps (specs/ledger.md §2.4). A policy can insert a step "every N
// committed units" of an anchor step. Such a step sits right after its
// anchor (and after the anchor's earlier window steps); the anchor's
// StepState.Windows counts them. While the anchor runs, each of its commits
// adds the item to each window step's open window (StepState.Open), in the
// same transaction; the N-th closes the window: a ready unit of the window
// step whose item lists the N anchor items. When the anchor completes, a
// last, shorter window takes what is left and the window step is planned:
// the task's cursor reaches it only to wait for the windows still running.
//
// A window unit's item: key is the window's number from 0; value is
// {"from": F, "to": T, "items": [...]}: the anchor's commits F+1 to T, in
// commit order, and the anchor items they committed.

// checkWindows reports steps whose window fields do not describe window
// steps placed right after their anchor.
func checkWindows(steps []ledger.StepState) error {
	owned := make([]bool, len(steps))
	for i, st := range steps {
		if st.Windows < 0 || i+st.Windows >= len(steps) {
			return fmt.Errorf("step %d %q: %d window steps do not fit after it", i, st.Name, st.Windows)
		}
		for c := i + 1; c <= i+st.Windows; c++ {
			ws := steps[c]
			if ws.Every <= 0 || ws.Anchor != i {
				return fmt.Errorf("step %d %q is counted as a window step of step %d but has every=%d anchor=%d", c, ws.Name, i, ws.Every, ws.Anchor)
			}
			owned[c] = true
		}
		if st.Every > 0 && st.Windows > 0 {
			return fmt.Errorf("window step %d %q cannot have window steps of its own", i, st.Name)
		}
	}
	for i, st := range steps {
		if st.Every > ledger.MaxEvery {
			return fmt.Errorf("window step %d %q: every is %d; the most is %d", i, st.Name, st.Every, ledger.MaxEvery)
		}
		if (st.Every > 0) != owned[i] {
			return fmt.Errorf("step %d %q: every=%d, but no step counts it among its window steps", i, st.Name, st.Every)
		}
	}
	return nil
}

// enterWindows starts a new pass of each window step of the anchor step
// being entered: what the earlier pass wrote is stale, and the first window
// opens empty.
func (s *Store) enterWindows(t *kv.Tx, task *ledger.Task, anchor int) error {
	n := t.Step(task, anchor).Windows
	for c := anchor + 1; c <= anchor+n; c++ {
		if err := s.resetStep(t, task, c); err != nil {
			return err
		}
		ws := t.Step(task, c)
		ws.Pass++
		ws.Planned, ws.Units, ws.Written, ws.Done, ws.Open = false, 0, 0, 0, ""
		if err := s.event(t, task, ledger.Event{Type: ledger.EvStepStarted, Step: ws.Name, Message: fmt.Sprintf(
			"pass %d, a unit every %d committed units of %q", ws.Pass, ws.Every, t.Step(task, anchor).Name)}); err != nil {
			return err
		}
	}
	return nil
}

// addToWindows records that the anchor step committed item: each of its
// window steps adds it to its open window, and a window that reaches N
// units becomes a unit.
func (s *Store) addToWindows(t *kv.Tx, task *ledger.Task, anchor, item int) error {
	n := t.Step(task, anchor).Windows
	for c := anchor + 1; c <= anchor+n; c++ {
		ws := t.Step(task, c)
		if ws.Open != "" {
			ws.Open += ","
		}
		ws.Open += strconv.Itoa(item)
		if strings.Count(ws.Open, ",")+1 >= ws.Every {
			if err := s.closeWindow(t, task, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// finishWindows closes the anchor's last, shorter windows when the anchor
// completes, and marks its window steps planned.
func (s *Store) finishWindows(t *kv.Tx, task *ledger.Task, anchor int) error {
	n := t.Step(task, anchor).Windows
	for c := anchor + 1; c <= anchor+n; c++ {
		if t.Step(task, c).Open != "" {
			if err := s.closeWindow(t, task, c); err != nil {
				return err
			}
		}
		ws := t.Step(task, c)
		ws.Planned, ws.Units = true, ws.Written
	}
	return nil
}

// closeWindow turns window step c's open window into a ready unit.
func (s *Store) closeWindow(t *kv.Tx, task *ledger.Task, c int) error {
	ws := t.Step(task, c)
	var w ledger.WindowItem
	for _, f := range strings.Split(ws.Open, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("window step %q: open window %q: %w", ws.Name, ws.Open, err)
		}
		w.Items = append(w.Items, n)
	}
	// Every window before this one was full.
	w.From = ws.Written * ws.Every
	w.To = w.From + len(w.Items)
	v, err := json.Marshal(w)
	if err != nil {
		return err
	}
	if err := s.writeUnits(t, task, c, []ledger.Item{{Key: json.RawMessage(strconv.Itoa(ws.Written)), Value: v}}); err != nil {
		return err
	}
	ws.Units, ws.Open = ws.Written, ""
	return nil
}

// liveSteps are the steps whose units may be claimed now: the cursor's,
// and the window steps after it that run beside it.
func liveSteps(t *kv.Tx, task *ledger.Task) []int {
	steps := []int{task.Cursor}
	if st := t.Step(task, task.Cursor); st.Windows == 0 && st.Every == 0 {
		return steps
	}
	for c := task.Cursor + 1; c < task.StepCount() && lease.WindowClaimable(t.Step(task, c), c, task.Cursor); c++ {
		steps = append(steps, c)
	}
	return steps
}

// outputStep is the step whose output is the task's: the last step that is
// not a window step.
func outputStep(t *kv.Tx, task *ledger.Task) int {
	i := task.StepCount() - 1
	for i > 0 && t.Step(task, i).Every > 0 {
		i--
	}
	return i
}
