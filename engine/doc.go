// Package engine runs lhengine tasks: HCL task files describing pipelines of
// WebAssembly step plugins, executed as durable, leased, checkpointed work
// units on an embedded Badger ledger.
//
// The data flow, one folder per stage:
//
//  1. internal/taskfile  parse and validate task.hcl (diagnostics keep file:line:col)
//  2. internal/plan      pin a run manifest (source, variables, plugin sha256s);
//     later, re-read it to plan fan-out items and evaluate each unit's input
//  3. ../store           the ledger: submit, claim a unit (lease + fencing epoch),
//     heartbeat, commit output + checkpoint + advance + event in one transaction
//  4. internal/worker    claim, run, renew, commit, repeat
//  5. internal/guest     one attempt in a fresh wazero instance under budgets;
//     host calls (log, heartbeat) through the lhengine_v1 module
//  6. fault              the one vocabulary of step failures
//
// An Engine ties them to a home directory: the store under home/store and the
// compiled-module cache under home/cache.
package engine
