// lhengine: the AssemblyScript SDK for lhengine step plugins (plugin ABI v1,
// specs/abi.md). Built with asc and @assemblyscript/wasi-shim, which make
// the module a WASI preview 1 command.
//
// A plugin calls run with a handler; the handler gets the decoded Request
// and returns an Outcome: ok, needsRepair or fail. Host calls (log, count,
// note, kvGet, kvPut, fetch, effect, generate, requestApproval,
// putArtifact, readArtifact) return a Reply: its status (>= 0 on success,
// else one of the ERR_ codes), its JSON value and the host's message.

import { Json, Kind, parseError } from "./json";

export { Json, Kind, quote, parseError } from "./json";

/** The ABI major version this SDK speaks; the host module is lhengine_v1. */
export const ABI: i32 = 1;

// Status codes a host call fails with (specs/abi.md, "Status codes").
export const ERR_RANGE: i32 = -1;
export const ERR_TOO_LARGE: i32 = -2;
export const ERR_INVALID: i32 = -3;
export const ERR_DENIED: i32 = -4;
export const ERR_NOT_FOUND: i32 = -5;
export const ERR_LEASE_LOST: i32 = -6;
export const ERR_BUDGET: i32 = -7;
export const ERR_UNAVAILABLE: i32 = -8;
export const ERR_INTERNAL: i32 = -9;
export const ERR_PAUSED: i32 = -10;

// Log levels.
export const DEBUG: i32 = 0;
export const INFO: i32 = 1;
export const WARN: i32 = 2;
export const ERROR: i32 = 3;

/** Largest message log passes, in bytes; longer ones are cut. */
export const LOG_MAX: i32 = 4096;

@external("lhengine_v1", "version")
declare function host_version(): i32;
@external("lhengine_v1", "log")
declare function host_log(level: i32, ptr: usize, len: i32): i32;
@external("lhengine_v1", "heartbeat")
declare function host_heartbeat(): i32;
@external("lhengine_v1", "result")
declare function host_result(out: usize, cap: i32): i32;
@external("lhengine_v1", "call")
declare function host_call(name: usize, nameLen: i32, req: usize, reqLen: i32, out: usize, cap: i32): i32;
@external("lhengine_v1", "artifact_put")
declare function host_artifact_put(meta: usize, metaLen: i32, data: usize, dataLen: i32, out: usize, cap: i32): i32;
@external("lhengine_v1", "artifact_read")
declare function host_artifact_read(ref: usize, refLen: i32, offset: i64, out: usize, cap: i32): i32;
@external("lhengine_v1", "last_error")
declare function host_last_error(out: usize, cap: i32): i32;

/** The fan-out item a step runs for. */
export class Item {
  index: i64 = 0;
  key: Json = Json.null();
  value: Json = Json.null();
}

/** Why the task came back to this step. */
export class Repair {
  count: i64 = 0;
  reason: string = "";
}

/** The request of one attempt (specs/abi.md section 3). */
export class Request {
  taskId: string = "";
  taskName: string = "";
  step: string = "";
  /** null unless the step fans out. */
  item: Item | null = null;
  /** 1 on the unit's first attempt. */
  attempt: i64 = 0;
  /** null on the first pass. */
  repair: Repair | null = null;
  /** The step's input; a null Json when it has none. */
  input: Json = Json.null();
  /** The parameters the run's harness policies hand to this step (an object). */
  policy: Json = Json.obj();
  /** When the attempt was leased (RFC 3339, UTC); "" when the request has none. */
  now: string = "";
  /** The task's environment facts, by name; empty without an environment block. */
  environment: Map<string, string> = new Map<string, string>();
  /** The task's objective and constraints, verbatim; keep them whole. */
  objective: string = "";
  constraints: Array<string> = [];
  /** The whole request as it came. */
  raw: Json = Json.null();

  /** Policy parameter name; null when no policy sets it. */
  policyParam(name: string): Json | null {
    return this.policy.get(name);
  }

  /** Decodes a request envelope; null when raw is not an object. */
  static decode(raw: Json): Request | null {
    if (raw.kind != Kind.Obj) return null;
    const r = new Request();
    r.raw = raw;
    r.taskId = str(raw, "task_id");
    r.taskName = str(raw, "task_name");
    r.step = str(raw, "step");
    r.now = str(raw, "now");
    r.objective = str(raw, "objective");
    const attempt = raw.get("attempt");
    if (attempt != null) r.attempt = attempt.asI64();
    const it = raw.get("item");
    if (it != null && it.kind == Kind.Obj) {
      const item = new Item();
      const idx = it.get("index");
      if (idx != null) item.index = idx.asI64();
      const k = it.get("key");
      if (k != null) item.key = k;
      const v = it.get("value");
      if (v != null) item.value = v;
      r.item = item;
    }
    const rp = raw.get("repair");
    if (rp != null && rp.kind == Kind.Obj) {
      const repair = new Repair();
      const c = rp.get("count");
      if (c != null) repair.count = c.asI64();
      repair.reason = str(rp, "reason");
      r.repair = repair;
    }
    const input = raw.get("input");
    if (input != null) r.input = input;
    const policy = raw.get("policy");
    if (policy != null && policy.kind == Kind.Obj) r.policy = policy;
    const env = raw.get("environment");
    if (env != null && env.kind == Kind.Obj) {
      for (let i = 0; i < env.keys.length; i++) r.environment.set(env.keys[i], env.items[i].asString());
    }
    const cs = raw.get("constraints");
    if (cs != null && cs.kind == Kind.Arr) {
      for (let i = 0; i < cs.items.length; i++) r.constraints.push(cs.items[i].asString());
    }
    return r;
  }
}

function str(o: Json, key: string): string {
  const v = o.get(key);
  return v == null ? "" : v.asString();
}

/** What a handler returns: ok, needsRepair or fail. */
export class Outcome {
  constructor(public output: Json, public repairReason: string | null, public error: string | null) {}

  /** The result object (specs/abi.md, "Result"). */
  toJson(): Json {
    const o = Json.obj();
    const e = this.error;
    const r = this.repairReason;
    if (e != null) return o.set("error", Json.str(e));
    if (r != null) return o.set("needs_repair", Json.bool(true)).set("reason", Json.str(r));
    return o.set("output", this.output);
  }
}

/** Success with output. */
export function ok(output: Json): Outcome {
  return new Outcome(output, null, null);
}

/** The step's check failed: the step's repair block applies. */
export function needsRepair(reason: string): Outcome {
  return new Outcome(Json.null(), reason, null);
}

/** The step failed, kind plugin_error, with message; its retry block may try again. */
export function fail(message: string): Outcome {
  return new Outcome(Json.null(), null, message);
}

/** Reads the whole of stdin. */
export function readStdin(): ArrayBuffer {
  let buf = new ArrayBuffer(1 << 16);
  let n = 0;
  for (;;) {
    if (n == buf.byteLength) {
      const bigger = new ArrayBuffer(buf.byteLength * 2);
      memory.copy(changetype<usize>(bigger), changetype<usize>(buf), n);
      buf = bigger;
    }
    const r = process.stdin.read(buf, n);
    if (r <= 0) break;
    n += r;
  }
  return buf.slice(0, n);
}

/** Reads the request from stdin, runs handler and writes its result to
 * stdout. A request that cannot be decoded fails the step. */
export function run(handler: (req: Request) => Outcome): void {
  const text = String.UTF8.decode(readStdin());
  const raw = Json.parse(text);
  let outcome: Outcome;
  if (raw == null) {
    outcome = fail("decoding the request: " + parseError);
  } else {
    const req = Request.decode(raw);
    outcome = req == null ? fail("decoding the request: not a JSON object") : handler(req);
  }
  process.stdout.write(outcome.toJson().toString() + "\n");
}

/** The answer of a host call: status >= 0 on success, with the response in
 * value; otherwise one of the ERR_ codes and the host's message. */
export class Reply {
  constructor(public status: i32, public value: Json, public message: string) {}
  get ok(): bool {
    return this.status >= 0;
  }
  /** The task is pausing for a person (requestApproval): return at once. */
  get paused(): bool {
    return this.status == ERR_PAUSED;
  }
  /** A failed step naming the call and its message. */
  toOutcome(what: string): Outcome {
    return fail(what + ": host call failed (" + this.status.toString() + "): " + this.message);
  }
}

function failed(status: i32): Reply {
  const buf = new ArrayBuffer(4096);
  const n = host_last_error(changetype<usize>(buf), buf.byteLength);
  const msg = n > 0 && n <= buf.byteLength ? String.UTF8.decode(buf.slice(0, n)) : "";
  return new Reply(status, Json.null(), msg);
}

// finish takes an output-convention answer rc for the buffer buf and
// returns the response's bytes, or null with the failure in lastFailure.
let lastFailure: Reply = new Reply(0, Json.null(), "");
function finish(rc: i32, buf: ArrayBuffer): ArrayBuffer | null {
  if (rc < 0) {
    lastFailure = failed(rc);
    return null;
  }
  if (rc > buf.byteLength) {
    buf = new ArrayBuffer(rc);
    const r = host_result(changetype<usize>(buf), rc);
    if (r < 0) {
      lastFailure = failed(r);
      return null;
    }
  }
  return buf.slice(0, rc);
}

function replyOf(rc: i32, buf: ArrayBuffer): Reply {
  const out = finish(rc, buf);
  if (out == null) return lastFailure;
  const v = Json.parse(String.UTF8.decode(out));
  if (v == null) return new Reply(ERR_INTERNAL, Json.null(), "the host answered bad JSON: " + parseError);
  return new Reply(rc, v, "");
}

/** The host's ABI version: 1. */
export function version(): i32 {
  return host_version();
}

/** Appends msg to the step's log at level (DEBUG .. ERROR), cut to LOG_MAX bytes. */
export function log(level: i32, msg: string): Reply {
  let b = String.UTF8.encode(msg);
  if (b.byteLength > LOG_MAX) {
    let end = LOG_MAX;
    while (end > 0 && (load<u8>(changetype<usize>(b) + end) & 0xc0) == 0x80) end--;
    b = b.slice(0, end);
  }
  const rc = host_log(level, changetype<usize>(b), b.byteLength);
  return rc < 0 ? failed(rc) : new Reply(rc, Json.null(), "");
}

/** Renews the work unit's lease; ERR_LEASE_LOST means stop. */
export function heartbeat(): Reply {
  const rc = host_heartbeat();
  return rc < 0 ? failed(rc) : new Reply(rc, Json.null(), "");
}

/** Performs capability name with the JSON request req. */
export function call(name: string, req: Json): Reply {
  return callRaw(name, String.UTF8.encode(req.toString()));
}

/** Performs capability name with the request bytes req as they are. */
export function callRaw(name: string, req: ArrayBuffer): Reply {
  const n = String.UTF8.encode(name);
  const buf = new ArrayBuffer(4096);
  const rc = host_call(changetype<usize>(n), n.byteLength, changetype<usize>(req), req.byteLength, changetype<usize>(buf), buf.byteLength);
  return replyOf(rc, buf);
}

/** The host's message about this attempt's most recent failed call; "" when none failed. */
export function lastError(): string {
  return failed(0).message;
}

/** Adds delta to the task's progress counter name ("progress.count"). */
export function count(name: string, delta: i64): Reply {
  return call("progress.count", Json.obj().set("name", Json.str(name)).set("delta", Json.int(delta)));
}

/** Proposes a progress note ("progress.note") of kind "finding", "decision" or "blocker". */
export function note(kind: string, text: string): Reply {
  return call("progress.note", Json.obj().set("kind", Json.str(kind)).set("text", Json.str(text)));
}

/** Reads key of the work unit's key-value state ("kv.get"): the response
 * {"found":true,"value":JSON} or {"found":false}. */
export function kvGet(key: string): Reply {
  return call("kv.get", Json.obj().set("key", Json.str(key)));
}

/** Sets key of the work unit's key-value state ("kv.put"). */
export function kvPut(key: string, value: Json): Reply {
  return call("kv.put", Json.obj().set("key", Json.str(key)).set("value", value));
}

/** A request without side effects to an allowlisted host ("http.fetch"). */
export function fetch(req: Json): Reply {
  return call("http.fetch", req);
}

/** Performs a side effect once per key ("effect.do", kind "http" or "file"). */
export function effect(key: string, kind: string, request: Json): Reply {
  return call("effect.do", Json.obj().set("key", Json.str(key)).set("kind", Json.str(kind)).set("request", request));
}

/** Calls a granted model ("model.generate"). */
export function generate(req: Json): Reply {
  return call("model.generate", req);
}

/** Asks a person to decide ("approval.request"). The first call's reply is
 * paused: return from the step at once; once a person decided, the step
 * runs again and the call answers the decision. */
export function requestApproval(req: Json): Reply {
  return call("approval.request", req);
}

/** Stores data as an artifact; the reply's value is {"ref":"sha256:...","size":N}. */
export function putArtifact(name: string, mediaType: string, data: ArrayBuffer): Reply {
  const meta = String.UTF8.encode(Json.obj().set("name", Json.str(name)).set("media_type", Json.str(mediaType)).toString());
  const buf = new ArrayBuffer(1024);
  const rc = host_artifact_put(changetype<usize>(meta), meta.byteLength, changetype<usize>(data), data.byteLength, changetype<usize>(buf), buf.byteLength);
  return replyOf(rc, buf);
}

/** Reads a whole artifact of this task; null when it fails, with the
 * failure in lastReadFailure. */
export let lastReadFailure: Reply = new Reply(0, Json.null(), "");
export function readArtifact(ref: string): ArrayBuffer | null {
  const r = String.UTF8.encode(ref);
  let data = new ArrayBuffer(0);
  const chunk = new ArrayBuffer(64 << 10);
  for (;;) {
    const n = host_artifact_read(changetype<usize>(r), r.byteLength, <i64>data.byteLength, changetype<usize>(chunk), chunk.byteLength);
    if (n < 0) {
      lastReadFailure = failed(n);
      return null;
    }
    if (n == 0) return data;
    const next = new ArrayBuffer(data.byteLength + n);
    memory.copy(changetype<usize>(next), changetype<usize>(data), data.byteLength);
    memory.copy(changetype<usize>(next) + data.byteLength, changetype<usize>(chunk), n);
    data = next;
  }
  return null; // not reached
}
