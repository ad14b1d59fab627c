package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/render"
	"github.com/lhengine/lhengine/engine"
)

// completeWait bounds what a completion may take: a shell waits on it
// while a person holds TAB.
const completeWait = 3 * time.Second

// completeTaskLimit is how many task ids a completion offers, newest first.
const completeTaskLimit = 200

// addCompletions makes the shell complete resource names (the completion
// command cobra adds writes the scripts): every argument its command's
// usage line names ID (task ids, with name and status), STEP (the steps of
// the task named before it), APPROVAL (the task's pending approvals, with
// their prompts) or NAME[@...] (policies on the search path), and the
// flags --from (steps), --policy and --without (policies). A completion
// never creates a home: with no store at the home it offers nothing.
func (a *app) addCompletions(c *cobra.Command) {
	for _, sub := range c.Commands() {
		a.addCompletions(sub)
	}
	words := strings.Fields(c.Use)
	if len(words) > 1 && c.ValidArgsFunction == nil {
		words = words[1:]
		for i, w := range words {
			if w == "|" {
				words = words[:i] // the first form of the usage line
				break
			}
		}
		if c.Name() == "diff" && c.Parent() != nil && c.Parent().Name() == "policies" {
			words = []string{"NAME", "NAME|ID"}
		}
		c.ValidArgsFunction = func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
			w := ""
			switch {
			case len(args) < len(words):
				w = words[len(args)]
			case len(words) > 0 && strings.HasSuffix(strings.Trim(words[len(words)-1], "[]"), "..."):
				w = words[len(words)-1]
			}
			w = strings.TrimSuffix(strings.Trim(w, "[]"), "...")
			switch {
			case w == "ID":
				return a.completeTasks(cmd, args, prefix), cobra.ShellCompDirectiveNoFileComp
			case w == "STEP" && len(args) > 0:
				return a.completeSteps(cmd, args[0], prefix), cobra.ShellCompDirectiveNoFileComp
			case w == "APPROVAL" && len(args) > 0:
				return a.completeApprovals(cmd, args[0], prefix), cobra.ShellCompDirectiveNoFileComp
			case strings.HasPrefix(w, "NAME") && strings.HasSuffix(w, "|ID"):
				return append(a.completePolicies(cmd, args, prefix), a.completeTasks(cmd, args, prefix)...), cobra.ShellCompDirectiveNoFileComp
			case strings.HasPrefix(w, "NAME") && c.Parent() != nil && c.Parent().Name() == "policies":
				return a.completePolicies(cmd, args, prefix), cobra.ShellCompDirectiveNoFileComp
			case strings.HasSuffix(w, ".hcl"):
				return []cobra.Completion{"hcl"}, cobra.ShellCompDirectiveFilterFileExt
			}
			return nil, cobra.ShellCompDirectiveDefault
		}
	}
	if c.Flags().Lookup("from") != nil && c.Name() == "retry" {
		_ = c.RegisterFlagCompletionFunc("from", func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return a.completeSteps(cmd, args[0], prefix), cobra.ShellCompDirectiveNoFileComp
		})
	}
	for _, flag := range []string{"policy", "without", "grant-policy"} {
		if f := c.Flags().Lookup(flag); f != nil && strings.Contains(f.Usage, "NAME") {
			_ = c.RegisterFlagCompletionFunc(flag, func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return a.completePolicies(cmd, args, prefix), cobra.ShellCompDirectiveNoFileComp
			})
		}
	}
}

// completeClient runs fn with a client of the home's owner, or of the
// home opened for the completion; it does nothing when there is no home
// (a completion never creates one) or when it takes longer than
// completeWait. Nothing it fails on is printed: a shell shows no errors.
func (a *app) completeClient(cmd *cobra.Command, fn func(context.Context, *api.Client) error) {
	a.chooseHome(cmd)
	a.stderr, a.logLevel = io.Discard, "off"
	a.logs.stderr = io.Discard
	ctx, cancel := context.WithTimeout(cmd.Context(), completeWait)
	defer cancel()
	_ = a.withClient(ctx, func(c *api.Client) error { return fn(ctx, c) })
}

// completeTasks offers the ids of the tasks, newest first, that start with
// prefix (ids are upper case; the prefix is matched in any case) and are
// not among args, with their name and status.
func (a *app) completeTasks(cmd *cobra.Command, args []string, prefix string) []cobra.Completion {
	var out []cobra.Completion
	a.completeClient(cmd, func(ctx context.Context, c *api.Client) error {
		tasks, _, err := c.TaskList(ctx, api.TaskQuery{Newest: true})
		for _, t := range tasks {
			if strings.HasPrefix(t.ID, strings.ToUpper(prefix)) && !contains(args, t.ID) {
				out = append(out, cobra.CompletionWithDesc(t.ID, t.Name+" · "+t.ShownStatus))
				if len(out) == completeTaskLimit {
					break
				}
			}
		}
		return err
	})
	return out
}

// completeSteps offers the steps of task ref that start with prefix.
func (a *app) completeSteps(cmd *cobra.Command, ref, prefix string) []cobra.Completion {
	var out []cobra.Completion
	a.completeClient(cmd, func(ctx context.Context, c *api.Client) error {
		t, err := c.Task(ctx, ref)
		if err != nil {
			return err
		}
		for i, s := range t.Steps {
			if strings.HasPrefix(s.Name, prefix) {
				out = append(out, cobra.CompletionWithDesc(s.Name, fmt.Sprintf("step %d of %d · %d done", i+1, len(t.Steps), s.Done)))
			}
		}
		return nil
	})
	return out
}

// completeApprovals offers the pending approvals of task ref that start
// with prefix, with their prompts.
func (a *app) completeApprovals(cmd *cobra.Command, ref, prefix string) []cobra.Completion {
	var out []cobra.Completion
	a.completeClient(cmd, func(ctx context.Context, c *api.Client) error {
		as, err := c.Approvals(ctx, ref)
		for _, ap := range as {
			if ap.State == "pending" && strings.HasPrefix(ap.ID, prefix) {
				out = append(out, cobra.CompletionWithDesc(ap.ID, render.Truncate(ap.Prompt, 60)))
			}
		}
		return err
	})
	return out
}

// completePolicies offers the policies on the search path the command
// would read (its --task or task file argument, its --policies, the
// home's), as NAME and NAME@VERSION, that start with prefix.
func (a *app) completePolicies(cmd *cobra.Command, args []string, prefix string) []cobra.Completion {
	a.chooseHome(cmd)
	task, _ := cmd.Flags().GetString("task")
	if task == "" && len(args) > 0 && strings.HasSuffix(args[0], ".hcl") {
		task = args[0]
	}
	dirs, _ := cmd.Flags().GetStringArray("policies")
	list, _ := engine.Policies(engine.PolicySearchPath(task, dirs, a.home), nil)
	var out []cobra.Completion
	seen := map[string]bool{}
	for _, p := range list {
		if p.ShadowedBy != "" {
			continue
		}
		for _, name := range []string{p.Name, fmt.Sprintf("%s@%d", p.Name, p.Version)} {
			if !seen[name] && strings.HasPrefix(name, prefix) {
				seen[name] = true
				out = append(out, cobra.CompletionWithDesc(name, render.Truncate(p.Assumption, 60)))
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
