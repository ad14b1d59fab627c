// The AssemblyScript guest of the conformance suites, written with the
// AssemblyScript SDK (plugins/sdk/assemblyscript): the same modes as the C,
// Go and Rust guests (../../c/conformance.c and ../../c/caps.c list them),
// so that it must give the same classified results, make the same host
// calls and see the same status codes. Modes of the input {"mode": ...}:
//
//   echo, error, repair, log, exit3       as conformance.c ("log" logs
//                                         "hello from guest")
//   kv, big, artifact, refused, effect    as caps.c
//   request  the request as the SDK decoded it (every field, and the
//            policy parameter single_tool)
//
// Build, from the module root, with the packages scripts/deps.sh installs:
//
//   bin/npm/node_modules/.bin/asc testdata/guests/assemblyscript/conformance/index.ts \
//     --config bin/npm/node_modules/@assemblyscript/wasi-shim/asconfig.json -O3 -o conformance.wasm
import * as lh from "../../../../plugins/sdk/assemblyscript/assembly/index";
import { Json } from "../../../../plugins/sdk/assemblyscript/assembly/index";

// The SDK fetches pending results itself; the guest asks once more to see
// that nothing is left pending.
@external("lhengine_v1", "result")
declare function raw_result(out: usize, cap: i32): i32;

function status(r: lh.Reply): Json {
  return Json.arr([Json.int(r.ok ? 0 : r.status), Json.str(r.message)]);
}

function failed(r: lh.Reply): lh.Outcome {
  return lh.fail(r.status.toString() + ": " + r.message);
}

function handle(req: lh.Request): lh.Outcome {
  const m = req.input.get("mode");
  const mode = m == null ? "" : m.asString();
  if (mode == "echo") {
    let item = Json.null();
    const it = req.item;
    if (it != null) item = Json.obj().set("index", Json.int(it.index)).set("key", it.key).set("value", it.value);
    return lh.ok(Json.obj().set("input", req.input).set("step", Json.str(req.step)).set("attempt", Json.int(req.attempt)).set("item", item));
  }
  if (mode == "request") {
    let item = Json.null();
    const it = req.item;
    if (it != null) item = Json.obj().set("index", Json.int(it.index)).set("key", it.key).set("value", it.value);
    let repair = Json.null();
    const rp = req.repair;
    if (rp != null) repair = Json.obj().set("count", Json.int(rp.count)).set("reason", Json.str(rp.reason));
    const env = Json.obj();
    const names = req.environment.keys();
    for (let i = 0; i < names.length; i++) env.set(names[i], Json.str(req.environment.get(names[i])));
    const constraints = Json.arr([]);
    for (let i = 0; i < req.constraints.length; i++) constraints.items.push(Json.str(req.constraints[i]));
    const single = req.policyParam("single_tool");
    return lh.ok(
      Json.obj()
        .set("task_id", Json.str(req.taskId))
        .set("task_name", Json.str(req.taskName))
        .set("step", Json.str(req.step))
        .set("attempt", Json.int(req.attempt))
        .set("item", item)
        .set("repair", repair)
        .set("input", req.input)
        .set("policy", req.policy)
        .set("single_tool", single == null ? Json.null() : single)
        .set("now", Json.str(req.now))
        .set("environment", env)
        .set("objective", Json.str(req.objective))
        .set("constraints", constraints),
    );
  }
  if (mode == "error") return lh.fail("requested error");
  if (mode == "repair") return lh.needsRepair("requested repair");
  if (mode == "log") {
    lh.log(lh.INFO, "hello from guest");
    const lease = lh.heartbeat().ok ? "ok" : "lost";
    return lh.ok(Json.obj().set("logged", Json.bool(true)).set("lease", Json.str(lease)));
  }
  if (mode == "exit3") {
    process.stderr.write("exit3: failing on purpose\n");
    process.exit(3);
  }
  if (mode == "kv") {
    let r = lh.kvPut("cursor", Json.obj().set("page", Json.int(3)));
    if (!r.ok) return failed(r);
    const got = lh.kvGet("cursor");
    if (!got.ok) return failed(got);
    const missing = lh.kvGet("missing");
    if (!missing.ok) return failed(missing);
    return lh.ok(
      Json.obj()
        .set("found", Json.bool(got.value.at("found").asBool()))
        .set("value", got.value.at("value"))
        .set("missing", Json.bool(missing.value.at("found").asBool())),
    );
  }
  if (mode == "big") {
    const r = lh.fetch(Json.obj().set("method", Json.str("GET")).set("url", Json.str("http://example.test/big")).set("headers", Json.obj()));
    if (!r.ok) return failed(r);
    const buf = new ArrayBuffer(16);
    const again = raw_result(changetype<usize>(buf), buf.byteLength);
    return lh.ok(
      Json.obj()
        .set("status", r.value.at("status"))
        .set("body_len", Json.int(String.UTF8.byteLength(r.value.at("body").asString())))
        .set("again", Json.int(again)),
    );
  }
  if (mode == "artifact") {
    const n: u32 = 2 << 20;
    const data = new ArrayBuffer(<i32>n);
    for (let i: u32 = 0; i < n; i++) store<u8>(changetype<usize>(data) + i, <u8>(i * 31 + (i >> 11)));
    const put = lh.putArtifact("data.bin", "application/octet-stream", data);
    if (!put.ok) return failed(put);
    const ref = put.value.at("ref").asString();
    const back = lh.readArtifact(ref);
    if (back == null) return failed(lh.lastReadFailure);
    let same = back.byteLength == data.byteLength;
    if (same) same = memory.compare(changetype<usize>(back), changetype<usize>(data), data.byteLength) == 0;
    const unknown = lh.readArtifact("sha256:0000");
    return lh.ok(
      Json.obj()
        .set("ref", Json.str(ref))
        .set("size", put.value.at("size"))
        .set("same", Json.bool(same))
        .set("unknown", unknown == null ? status(lh.lastReadFailure) : Json.arr([Json.int(0), Json.str("")])),
    );
  }
  if (mode == "refused") {
    const unknown = status(lh.call("mail.send", Json.obj()));
    const invalid = status(lh.callRaw("kv.get", String.UTF8.encode("not json")));
    const denied = status(lh.kvPut("denied", Json.int(1)));
    const ok = lh.kvGet("x").ok;
    return lh.ok(
      Json.obj()
        .set("unknown", unknown)
        .set("invalid", invalid)
        .set("denied", denied)
        .set("ok", Json.bool(ok))
        .set("after_ok", Json.str(lh.lastError())),
    );
  }
  if (mode == "effect") {
    const request = Json.obj()
      .set("method", Json.str("POST"))
      .set("url", Json.str("http://127.0.0.1:8080/mail"))
      .set("headers", Json.obj().set("Content-Type", Json.str("application/json")))
      .set("body", Json.str("{}"));
    const r1 = lh.effect("send-1", "http", request);
    if (!r1.ok) return failed(r1);
    const r2 = lh.effect("send-1", "http", request);
    if (!r2.ok) return failed(r2);
    const res = r1.value.at("result");
    const progress = lh.count("pages", 1).ok && lh.note("finding", "two pages").ok;
    return lh.ok(
      Json.obj()
        .set("status", res.at("status"))
        .set("body", res.at("body"))
        .set("replayed", Json.arr([Json.bool(r1.value.at("replayed").asBool()), Json.bool(r2.value.at("replayed").asBool())]))
        .set("progress", Json.bool(progress)),
    );
  }
  return lh.fail("unknown mode");
}

lh.run(handle);
