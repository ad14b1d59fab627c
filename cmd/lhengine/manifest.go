package main

import (
	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/render"
)

func (a *app) manifestCmd() *cobra.Command {
	var text bool
	cmd := &cobra.Command{
		Use:   "manifest ID",
		Short: "The run manifest pinned at submit: versions, task source hash, variables, plugins, policies, models, prompts, replay set",
		Long: `Show the run manifest of a task, fixed when it was submitted: the engine and
ABI versions, the task file and the sha256 of its pinned source, the variable
values, each step's plugin with its sha256, the harness policies the run
applies (NAME@VERSION with the sha256 of the pinned text) and every
capability of the steps they insert (a mount, a host, an effect, a
workspace, a model: granted by the task, whose steps have it too, or by
--grant-policy), the models the task
declares (name, provider, model id, base URL, the name of the environment
variable holding the key, never a key, and prices), its prompts (name,
version, sha256 of the pinned text) and, for a task submitted with
--model-replay, the replay set its model calls are answered from (the folder
it was read from, the number of recordings and the set's sha256). The run uses
these pins, never the files they came from, so editing a policy, plugin or
prompt file, or the replay folder, does not change a submitted task. --text
adds the pinned policy and prompt texts; -o json prints everything, the task
source included.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.withClient(ctx, func(c *api.Client) error {
				m, err := c.Manifest(ctx, args[0])
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(m)
				}
				return render.Manifest(a.stdout, m, text)
			})
		},
	}
	cmd.Flags().BoolVar(&text, "text", false, "print the pinned text of each policy and prompt")
	return cmd
}
