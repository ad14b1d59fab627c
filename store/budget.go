package store

import (
	"context"

	"github.com/lhengine/lhengine/ledger"
)

// Task budgets (internal/budget): task-wide limits whose reaching pauses
// the task (never fails it) until a person raises them (RaiseBudgets) and
// resumes it.

// RaiseBudgets raises budgets of the task id, each recorded as an event
// with by and the old and new limit. A raise to a value below the usage
// is refused (it would pause the task again at once); a raise lower than
// the limit lowers it. The task's status does not change: Resume
// continues a paused task.
func (s *Store) RaiseBudgets(ctx context.Context, id string, raises []ledger.BudgetRaise, by string) (*ledger.Task, error) {
	return s.budgets.Raise(ctx, id, raises, by)
}
