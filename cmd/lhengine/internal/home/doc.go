// Package home owns a home's ownership: who owns a home, how that is
// decided, and how a command gets its way in.
//
// A home has one owner: the process that has its store open (the store's
// directory lock is the one arbiter). The owner serves the API on the
// home's socket and records itself in the owner record; every command
// reaches the home through an API client, either of the owner's socket or,
// when no owner answers, of this process, which then opens the store and
// owns the home for as long as the command runs (Connect: the election).
// With --server a command is a client of an owner over TCP instead.
//
// The files the election reads and writes (the socket, the owner record,
// the tokens) are ../../../../internal/homefiles, a leaf the server uses
// too; this package holds everything that decides: choosing the home
// (Find), making it private (Private), the election and its waits
// (Connect, With, WithAgain, WaitForOwner), and what became of an owner
// that went away (Fate, Gone). specs/RATIONALE.md, "Why one owner per
// home, serving a Unix socket?", says why.
package home
