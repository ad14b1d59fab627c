package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/engine"
)

// versions are what `lhengine version` reports.
type versions struct {
	Engine   string `json:"engine"`
	ABI      int    `json:"plugin_abi"`
	Language int    `json:"task_language"`
	Go       string `json:"go"`
	Wazero   string `json:"wazero"`
	Badger   string `json:"badger"`
}

func currentVersions() versions {
	v := versions{Engine: engine.Version, ABI: engine.ABIVersion, Language: engine.LanguageVersion,
		Go: runtime.Version(), Wazero: "unknown", Badger: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			switch d.Path {
			case "github.com/tetratelabs/wazero":
				v.Wazero = d.Version
			case "github.com/dgraph-io/badger/v4":
				v.Badger = d.Version
			}
		}
	}
	return v
}

func (v versions) write(w io.Writer) {
	fmt.Fprintf(w, "lhengine %s\nplugin ABI:    v%d\ntask language: v%d\ngo:            %s\nwazero:        %s\nbadger:        %s\n",
		v.Engine, v.ABI, v.Language, v.Go, v.Wazero, v.Badger)
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
