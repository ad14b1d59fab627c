package evalrun

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/lhengine/lhengine/ledger"
)

// Measure reads one run's figures from its store: the task record (status,
// repairs, model cost, creation and end), every unit of every step
// (attempts started, over all passes), the manifest (policy pins, task
// source) and, when verifier is not "", the verifier task's output. The
// verdict is v's checks applied to the task's recorded output.
func Measure(r ledger.Reader, id, verifier string, v Verify) (Measured, error) {
	t, err := r.Task(id)
	if err != nil {
		return Measured{}, err
	}
	m := Measured{
		Task: id, Status: string(t.Status), Repairs: t.Repairs, Cost: t.ModelUsage.Cost,
		VerifierTask: verifier, Output: t.Output,
	}
	if !t.FinishedAt.IsZero() {
		// Round(0) drops a monotonic reading the store's cache of the
		// record may hold: the figure is what the record says.
		m.WallSeconds = t.FinishedAt.Round(0).Sub(t.CreatedAt.Round(0)).Seconds()
	}
	for step := range t.Steps {
		units, err := r.Units(id, step)
		if err != nil {
			return Measured{}, err
		}
		for _, u := range units {
			m.Attempts += u.Attempt
			m.Repeated += max(u.Attempt-1, 0)
		}
	}
	man, err := r.Manifest(id)
	if err != nil {
		return Measured{}, err
	}
	sum := sha256.Sum256(man.Source)
	m.TaskSHA256 = hex.EncodeToString(sum[:])
	for _, p := range man.Policies {
		m.Pins = append(m.Pins, p.Ref()+" "+p.SHA256)
	}
	if man.ModelReplay != nil {
		m.ReplaySet = man.ModelReplay.SHA256
	}
	if t.Status != ledger.Succeeded {
		m.Reason = fmt.Sprintf("the task %s", t.Status)
		if t.Reason != "" {
			m.Reason += ": " + t.Reason
		}
		return m, nil
	}
	m.Pass, m.Reason = Check(v, t.Output)
	if !m.Pass || v.PluginPath == "" {
		return m, nil
	}
	if verifier == "" {
		m.Pass, m.Reason = false, "the verifier plugin did not run"
		return m, nil
	}
	vt, err := r.Task(verifier)
	if err != nil {
		return Measured{}, err
	}
	if vt.Status != ledger.Succeeded {
		m.Pass, m.Reason = false, fmt.Sprintf("the verifier task %s: %s", vt.Status, vt.Reason)
		return m, nil
	}
	var verdict struct {
		Pass   *bool  `json:"pass"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(vt.Output, &verdict); err != nil || verdict.Pass == nil {
		m.Pass, m.Reason = false, fmt.Sprintf("the verifier's output is not {\"pass\": bool, \"reason\": \"...\"}: %s", vt.Output)
		return m, nil
	}
	m.Pass, m.Reason = *verdict.Pass, verdict.Reason
	return m, nil
}

// replayMissed matches the engine's refusal of a model call that its
// task's replay set holds no recording of.
var replayMissed = regexp.MustCompile(`no recorded response for request sha256 [0-9a-f]{64}`)

// ReplayMiss returns the failure message of the first attempt of task id
// that failed because a model call missed the task's replay set (the
// engine's message names the request's sha256), or "" if none did.
func ReplayMiss(r ledger.Reader, id string) (string, error) {
	t, err := r.Task(id)
	if err != nil {
		return "", err
	}
	if t.Status == ledger.Succeeded {
		return "", nil
	}
	for step := range t.Steps {
		attempts, err := r.Attempts(id, step)
		if err != nil {
			return "", err
		}
		for _, a := range attempts {
			if a.Failure != nil && replayMissed.MatchString(a.Failure.Message) {
				return a.Failure.Message, nil
			}
		}
	}
	return "", nil
}

// Check applies the expected-output checks of v (expect, output_includes,
// output_excludes) to a task's output and says why it fails, if it does.
func Check(v Verify, output json.RawMessage) (bool, string) {
	var got any
	if err := decode(output, &got); err != nil {
		return false, fmt.Sprintf("the output is not JSON: %v", err)
	}
	if v.Expect != nil {
		var want any
		if err := decode(v.Expect, &want); err != nil {
			return false, fmt.Sprintf("expect is not JSON: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			return false, "the output is not the expected one"
		}
	}
	var texts []string
	strs(got, &texts)
	for _, s := range v.Includes {
		if !containsAny(texts, s) {
			return false, fmt.Sprintf("no text of the output includes %q", s)
		}
	}
	for _, s := range v.Excludes {
		if containsAny(texts, s) {
			return false, fmt.Sprintf("the output includes %q", s)
		}
	}
	return true, ""
}

// decode reads JSON keeping numbers as written, so 1 and 1.0 compare as
// the same number only when they are written alike.
func decode(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// strs collects every string value of a decoded JSON value.
func strs(v any, out *[]string) {
	switch x := v.(type) {
	case string:
		*out = append(*out, x)
	case []any:
		for _, e := range x {
			strs(e, out)
		}
	case map[string]any:
		for _, e := range x {
			strs(e, out)
		}
	}
}

func containsAny(texts []string, s string) bool {
	for _, t := range texts {
		if strings.Contains(t, s) {
			return true
		}
	}
	return false
}

// unitKey names a unit in a recovery check.
type unitKey struct {
	step string
	item int
}

// Recovery checks, from the durable records of a task that was killed and
// resumed, that recovery was correct: the task succeeded, its output
// equals want (as JSON values), and no unit committed before the crash ran
// again. resumedAt is the sequence number of the first event written after
// the crash. A unit committed before it (a unit_done event of its current
// pass) ran again if an event of a later attempt of it follows the crash
// before its step is entered again (a step_started event: a repair pass
// legitimately runs it again).
func Recovery(r ledger.Reader, id string, resumedAt uint64, want json.RawMessage) (bool, string, error) {
	t, err := r.Task(id)
	if err != nil {
		return false, "", err
	}
	if t.Status != ledger.Succeeded {
		return false, fmt.Sprintf("the resumed task %s: %s", t.Status, t.Reason), nil
	}
	var got, exp any
	if err := decode(t.Output, &got); err != nil {
		return false, "", err
	}
	if err := decode(want, &exp); err != nil {
		return false, "", fmt.Errorf("the reference output: %w", err)
	}
	if !reflect.DeepEqual(got, exp) {
		return false, "the output differs from the uncrashed run's", nil
	}
	events, err := r.Events(id, 0, 0)
	if err != nil {
		return false, "", err
	}
	if why := ranAgain(events, resumedAt); why != "" {
		return false, why, nil
	}
	return true, "", nil
}

// ranAgain returns how a unit committed before the crash (events before
// resumedAt) ran again after it, or "" if none did.
func ranAgain(events []ledger.Event, resumedAt uint64) string {
	committed := map[unitKey]int{} // attempt committed before the crash
	entered := map[string]bool{}   // steps entered again after the crash
	for _, e := range events {
		if e.Type == ledger.EvStepStarted {
			if e.Seq < resumedAt {
				for k := range committed {
					if k.step == e.Step {
						delete(committed, k)
					}
				}
			} else {
				entered[e.Step] = true
			}
			continue
		}
		if e.Item == nil || e.Attempt == 0 {
			continue
		}
		k := unitKey{e.Step, *e.Item}
		if e.Seq < resumedAt {
			if e.Type == ledger.EvUnitDone {
				committed[k] = e.Attempt
			}
			continue
		}
		if a, ok := committed[k]; ok && !entered[e.Step] && e.Attempt != a {
			return fmt.Sprintf("unit %s[%d] committed attempt %d before the crash and ran again as attempt %d (%s)",
				e.Step, *e.Item, a, e.Attempt, e.Type)
		}
	}
	return ""
}
