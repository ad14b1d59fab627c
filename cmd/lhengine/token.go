package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/home"
	"github.com/lhengine/lhengine/internal/homefiles"
)

// tokenCmd manages the home's named API tokens. It works on the home's
// files directly: no owner needs to run, and an owner serving TCP reads
// them again for every request.
func (a *app) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Named API tokens for serve --listen: add, ls, rm",
		Long: `A TCP listener of "lhengine serve --listen" requires a bearer token. The home's
own token (HOME/run/token) is named "owner"; "token add NAME" gives a person a
token of their own, kept in HOME/run/tokens/NAME (readable by this user only).
What a request decides, pauses, raises or retries over TCP is recorded as made
by its token's name, whatever the client says: give each person their own.

A running serve reads the tokens again for every request: a token added works
at once, a token removed is refused from the next request on. These commands
work on the home's files; they need no serve.`,
	}
	cmd.AddCommand(a.tokenAddCmd(), a.tokenLsCmd(), a.tokenRmCmd())
	return cmd
}

func (a *app) tokenAddCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "add NAME",
		Short: "Create a named token and print it, once",
		Long: `add creates a random token (32 bytes, hex) named NAME (1 to 64 of a-z, 0-9, _
and -; not "owner") and prints it: it is not shown again. A name in use is
refused: remove it first. Give it to the person with --token-file FILE or
LHENGINE_TOKEN, or for the dashboard, paste it at its login page.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := home.Private(a.home, true, a.logger()); err != nil {
				return err
			}
			tok, err := homefiles.AddToken(a.home, args[0])
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(map[string]string{"name": args[0], "token": tok})
			}
			fmt.Fprintln(a.stdout, tok)
			fmt.Fprintf(a.stderr, "token %s created: it is shown only this once (lhengine token rm %s revokes it)\n", args[0], args[0])
			return nil
		},
	}
}

func (a *app) tokenLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the names of the tokens (never their secrets): owner, if serve created it, then the named ones",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := home.Private(a.home, false, a.logger()); err != nil {
				return err
			}
			names, err := homefiles.TokenNames(a.home)
			if err != nil {
				return err
			}
			if _, err := os.Stat(api.TokenPath(a.home)); err == nil {
				names = append([]string{homefiles.OwnerToken}, names...)
			}
			if a.json() {
				return a.printJSON(append([]string{}, names...))
			}
			for _, n := range names {
				fmt.Fprintln(a.stdout, n)
			}
			return nil
		},
	}
}

func (a *app) tokenRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a named token: from the next request on, it is refused",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := home.Private(a.home, false, a.logger()); err != nil {
				return err
			}
			if err := homefiles.RemoveToken(a.home, args[0]); err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(map[string]string{"removed": args[0]})
			}
			fmt.Fprintf(a.stdout, "token %s removed\n", args[0])
			return nil
		},
	}
}
