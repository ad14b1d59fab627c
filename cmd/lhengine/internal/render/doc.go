// Package render writes what the commands print for a person: the API's
// records as text (a task's progress report and its summary, the task
// list, outputs, attempts, events, a handoff bundle, a run manifest),
// policies and the unified diff of two of their texts, and a plugin test's
// result. Each function writes to the io.Writer it is given; the JSON a
// command prints with -o json is the API's records as they are, not this.
package render
