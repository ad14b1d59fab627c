package taskfile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/lhengine/lhengine/engine/internal/hcldecode"
)

// Notify is a task's notify block: the events of the task's log that are
// POSTed to URL, each once (specs/task-language.md, "Notifications").
//
//	notify {
//	  url    = "http://127.0.0.1:8025/hook"
//	  events = ["waiting_approval", "paused", "succeeded", "failed"]
//	}
//
// The task author grants the URL by writing it: it is checked here (an
// http or https URL with a host, no user information, no fragment), not
// against the hosts of the steps' grants.
type Notify struct {
	URL       string
	Events    []string // distinct names of NotifyEvents, as written
	DeclRange hcl.Range
}

// NotifyEvents lists the event types a notify block may name: those of the
// task's event log (store.EventType) that mean something to a person. The
// per-unit ones (unit_done, step_started, lease_expired, ...) are not
// among them: a notification per unit would be a flood.
var NotifyEvents = []string{
	"submitted", "started", "step_done", "repair", "paused", "resumed", "retried",
	"succeeded", "failed", "cancelled", "item_failed",
	"budget_warning", "budget_raised", "drift", "effect_resolved",
	"waiting_approval", "approval_requested", "approval_decided", "approval_expired", "approval_voided",
}

var notifySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "url", Required: true},
		{Name: "events", Required: true},
	},
}

// decodeNotifyBlock decodes a task's notify block. Every problem is
// reported on the attribute's value, or on the element of a literal events
// list at fault; an unknown argument or event name gets a "Did you mean".
func decodeNotifyBlock(block *hcl.Block) (*Notify, hcl.Diagnostics) {
	n := &Notify{DeclRange: block.DefRange}
	content, diags := block.Body.Content(notifySchema)
	diags = append(diags, hcldecode.Fields(content.Attributes,
		hcldecode.Set("url", &n.URL, urlCheck("Invalid notify URL",
			`url must be an http or https URL with a host, such as "http://127.0.0.1:8025/hook"`, notifyURLProblem)),
		hcldecode.Set("events", &n.Events, decodeNotifyEvents),
	)...)
	return n, diags
}

// decodeNotifyEvents evaluates the events list: constant, not empty, each
// name one of NotifyEvents and given once.
func decodeNotifyEvents(attr *hcl.Attribute) ([]string, hcl.Diagnostics) {
	list, diags := hcldecode.StringList(attr)
	if diags.HasErrors() {
		return nil, diags
	}
	if len(list) == 0 {
		return nil, append(diags, hcldecode.Error(attr, "Empty event list",
			fmt.Sprintf("events must name at least one event, such as \"succeeded\" or \"failed\". The events are %s. To send no notification, leave the block out.", quoteList(NotifyEvents))))
	}
	elems := hcldecode.ElementRanges(attr, len(list))
	at := func(i int, d *hcl.Diagnostic) *hcl.Diagnostic {
		if elems != nil {
			// The element alone: the whole list would make a long excerpt.
			d.Subject, d.Context = elems[i].Ptr(), nil
		}
		return d
	}
	out := make([]string, 0, len(list))
	for i, name := range list {
		switch {
		case !slices.Contains(NotifyEvents, name):
			diags = append(diags, at(i, hcldecode.Error(attr, "Unknown event",
				fmt.Sprintf("%q is not an event a notify block can name.%s The events are %s.", name, hcldecode.DidYouMean(name, NotifyEvents), quoteList(NotifyEvents)))))
		case slices.Contains(out, name):
			diags = append(diags, at(i, hcldecode.Error(attr, "Duplicate event",
				fmt.Sprintf("%q is listed twice; each event is notified once whatever the list says.", name))))
		default:
			out = append(out, name)
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return out, diags
}

// notifyURLProblem says what is wrong with u as a notify URL, or "".
func notifyURLProblem(u string) string {
	parsed, problem := httpURL(u)
	switch {
	case problem != "":
		return problem
	case parsed.User != nil:
		return fmt.Sprintf("%q has user information; a notification carries no credentials", u)
	case parsed.Fragment != "" || strings.Contains(u, "#"):
		return fmt.Sprintf("%q has a fragment, which is never sent", u)
	}
	// The host is held to the rules of the host patterns steps are granted
	// (HostAllowed): a name or an address, and a port from 1 to 65535.
	if _, _, err := parseHostPattern(parsed.Host); err != nil {
		return fmt.Sprintf("%q has a host that is not valid: %s", u, err)
	}
	if parsed.Port() == "*" {
		return fmt.Sprintf("%q has no port number", u)
	}
	return ""
}

// quoteList writes names quoted and comma-separated.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
