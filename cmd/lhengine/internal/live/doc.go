// Package live draws what a command shows on stderr while it works: the
// progress bar of a task that run, resume, retry or submit --follow works
// or follows (Bar), the line a submission shows while its plugins load
// (Compile), and an eval's bar per policy state (Eval). Each is the engine
// logger's output while it is drawn: a log line written through it lands
// above the drawing, never inside it. Off a terminal each prints plain
// lines instead, or nothing.
package live
