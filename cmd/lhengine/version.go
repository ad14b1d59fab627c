package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/server"
)

// versions are what `lhengine version` reports: this binary's.
type versions api.Versions

func currentVersions() versions { return versions(server.Versions()) }

func (v versions) write(w io.Writer) {
	fmt.Fprintf(w, "lhengine %s\n", v.Engine)
	commit := "unknown (built without VCS information)"
	if v.Commit != "" {
		commit = v.Commit
		if v.CommitTime != "" {
			commit += " (" + v.CommitTime + ")"
		}
		if v.Modified {
			commit += ", with uncommitted changes"
		}
	}
	fmt.Fprintf(w, "commit:        %s\nplugin ABI:    v%d\ntask language: v%d\ngo:            %s\nwazero:        %s\nbadger:        %s\n",
		commit, v.ABI, v.Language, v.Go, v.Wazero, v.Badger)
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Versions of the engine, the plugin ABI, the task language, Go, wazero and Badger",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := currentVersions()
			if a.json() {
				return a.printJSON(v)
			}
			v.write(a.stdout)
			return nil
		},
	}
}

// versionText is the text of --version (a cobra template without actions).
func versionText() string {
	var b strings.Builder
	currentVersions().write(&b)
	return b.String()
}
