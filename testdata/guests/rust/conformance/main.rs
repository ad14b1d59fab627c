// The Rust guest of the conformance suites, written with the Rust SDK
// (plugins/sdk/rust, the crate lhengine): the same modes as the C and Go
// guests (../../c/conformance.c and ../../c/caps.c list them), so that it
// must give the same classified results, make the same host calls and see
// the same status codes. Modes of the input {"mode": ...}:
//
//   echo, error, repair, log, exit3       as conformance.c ("log" logs
//                                         "hello from guest")
//   kv, big, artifact, refused, effect    as caps.c
//   request  the request as the SDK decoded it (every field, and the
//            policy parameter single_tool)
//   version  logs "hello from rust" at info, heartbeats, and reports the
//            status of each and the host's ABI version
//   panic    panics: std aborts, which traps
//   clock    reads the wall clock, sleeps 30 s and reports the wall time and
//            how much the monotonic clock advanced across the sleep (the
//            engine's guest clock is deterministic: the sleep returns at once)
//
// Build (Debian bookworm: rustc 1.63 and libstd-rust-dev-wasm32), the crate
// first:
//
//   rustc --target wasm32-wasi -O --edition 2021 --crate-type rlib --crate-name lhengine plugins/sdk/rust/lib.rs -o liblhengine.rlib
//   rustc --target wasm32-wasi -O --edition 2021 -C strip=debuginfo --extern lhengine=liblhengine.rlib main.rs -o conformance.wasm

use lhengine::{Error, Json, Level, Outcome, Request};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

// The SDK fetches pending results itself; the guest asks once more to see
// that nothing is left pending.
#[link(wasm_import_module = "lhengine_v1")]
extern "C" {
    fn result(out: *mut u8, cap: i32) -> i32;
}

fn status(r: Result<(), Error>) -> Json {
    match r {
        Ok(()) => Json::Arr(vec![Json::int(0), Json::str("")]),
        Err(e) => Json::Arr(vec![Json::int(e.status as i64), Json::str(&e.message)]),
    }
}

fn handle(req: &Request) -> Result<Outcome, Error> {
    let mode = req.input.get("mode").and_then(Json::as_str).unwrap_or("");
    Ok(match mode {
        "echo" => {
            let item = match &req.item {
                None => Json::Null,
                Some(it) => Json::obj(vec![("index", Json::int(it.index)), ("key", it.key.clone()), ("value", it.value.clone())]),
            };
            lhengine::ok(Json::obj(vec![
                ("input", req.input.clone()),
                ("step", Json::str(&req.step)),
                ("attempt", Json::int(req.attempt)),
                ("item", item),
            ]))
        }
        "request" => {
            let item = match &req.item {
                None => Json::Null,
                Some(it) => Json::obj(vec![("index", Json::int(it.index)), ("key", it.key.clone()), ("value", it.value.clone())]),
            };
            let repair = match &req.repair {
                None => Json::Null,
                Some(r) => Json::obj(vec![("count", Json::int(r.count)), ("reason", Json::str(&r.reason))]),
            };
            let env = Json::Obj(req.environment.iter().map(|(k, v)| (k.clone(), Json::str(v))).collect());
            let constraints = Json::Arr(req.constraints.iter().map(|c| Json::str(c)).collect());
            lhengine::ok(Json::obj(vec![
                ("task_id", Json::str(&req.task_id)),
                ("task_name", Json::str(&req.task_name)),
                ("step", Json::str(&req.step)),
                ("attempt", Json::int(req.attempt)),
                ("item", item),
                ("repair", repair),
                ("input", req.input.clone()),
                ("policy", req.policy.clone()),
                ("single_tool", req.policy_param("single_tool").cloned().unwrap_or(Json::Null)),
                ("now", Json::str(&req.now)),
                ("environment", env),
                ("objective", Json::str(&req.objective)),
                ("constraints", constraints),
            ]))
        }
        "error" => lhengine::fail("requested error"),
        "repair" => lhengine::needs_repair("requested repair"),
        "log" => {
            let _ = lhengine::log(Level::Info, "hello from guest");
            let lease = if lhengine::heartbeat().is_ok() { "ok" } else { "lost" };
            lhengine::ok(Json::obj(vec![("logged", Json::Bool(true)), ("lease", Json::str(lease))]))
        }
        "exit3" => {
            eprintln!("exit3: failing on purpose");
            std::process::exit(3)
        }
        "version" => {
            let code = |r: Result<(), Error>| Json::int(r.err().map(|e| e.status).unwrap_or(0) as i64);
            let logged = code(lhengine::log(Level::Info, "hello from rust"));
            let beat = code(lhengine::heartbeat());
            lhengine::ok(Json::obj(vec![("log", logged), ("heartbeat", beat), ("version", Json::int(lhengine::version() as i64))]))
        }
        "panic" => panic!("requested panic"),
        "clock" => {
            let wall = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
            let start = Instant::now();
            std::thread::sleep(Duration::from_secs(30));
            let slept = start.elapsed().as_millis();
            lhengine::ok(Json::obj(vec![("wall_secs", Json::int(wall as i64)), ("slept_ms", Json::int(slept as i64))]))
        }
        "kv" => {
            lhengine::kv_put("cursor", &Json::obj(vec![("page", Json::int(3))]))?;
            let v = lhengine::kv_get("cursor")?;
            let missing = lhengine::kv_get("missing")?;
            lhengine::ok(Json::obj(vec![
                ("found", Json::Bool(v.is_some())),
                ("value", v.unwrap_or(Json::Null)),
                ("missing", Json::Bool(missing.is_some())),
            ]))
        }
        "big" => {
            let resp = lhengine::fetch(&Json::obj(vec![
                ("method", Json::str("GET")),
                ("url", Json::str("http://example.test/big")),
                ("headers", Json::obj(vec![])),
            ]))?;
            let mut buf = [0u8; 16];
            let again = unsafe { result(buf.as_mut_ptr(), buf.len() as i32) };
            let body_len = resp.get("body").and_then(Json::as_str).map(|b| b.len()).unwrap_or(0);
            lhengine::ok(Json::obj(vec![
                ("status", resp.get("status").cloned().unwrap_or(Json::Null)),
                ("body_len", Json::int(body_len as i64)),
                ("again", Json::int(again as i64)),
            ]))
        }
        "artifact" => {
            let data: Vec<u8> = (0..2u32 << 20).map(|i| (i.wrapping_mul(31).wrapping_add(i >> 11)) as u8).collect();
            let r = lhengine::put_artifact("data.bin", "application/octet-stream", &data)?;
            let back = lhengine::read_artifact(&r)?;
            let unknown = status(lhengine::read_artifact("sha256:0000").map(|_| ()));
            lhengine::ok(Json::obj(vec![
                ("ref", Json::str(&r)),
                ("size", Json::int(back.len() as i64)),
                ("same", Json::Bool(back == data)),
                ("unknown", unknown),
            ]))
        }
        "refused" => {
            let unknown = status(lhengine::call("mail.send", &Json::obj(vec![])).map(|_| ()));
            let invalid = status(lhengine::call_raw("kv.get", b"not json").map(|_| ()));
            let denied = status(lhengine::kv_put("denied", &Json::int(1)));
            let ok = lhengine::kv_get("x").is_ok();
            lhengine::ok(Json::obj(vec![
                ("unknown", unknown),
                ("invalid", invalid),
                ("denied", denied),
                ("ok", Json::Bool(ok)),
                ("after_ok", Json::str(&lhengine::last_error())),
            ]))
        }
        "effect" => {
            let req = Json::obj(vec![
                ("method", Json::str("POST")),
                ("url", Json::str("http://127.0.0.1:8080/mail")),
                ("headers", Json::obj(vec![("Content-Type", Json::str("application/json"))])),
                ("body", Json::str("{}")),
            ]);
            let r1 = lhengine::effect("send-1", "http", &req)?;
            let r2 = lhengine::effect("send-1", "http", &req)?;
            let res = r1.get("result").cloned().unwrap_or(Json::Null);
            let replayed = |r: &Json| Json::Bool(r.get("replayed").and_then(Json::as_bool).unwrap_or(false));
            let progress = lhengine::count("pages", 1).is_ok() && lhengine::note("finding", "two pages").is_ok();
            lhengine::ok(Json::obj(vec![
                ("status", res.get("status").cloned().unwrap_or(Json::Null)),
                ("body", res.get("body").cloned().unwrap_or(Json::Null)),
                ("replayed", Json::Arr(vec![replayed(&r1), replayed(&r2)])),
                ("progress", Json::Bool(progress)),
            ]))
        }
        _ => lhengine::fail("unknown mode"),
    })
}

fn main() {
    lhengine::run(|req| match handle(req) {
        Ok(o) => o,
        Err(e) => lhengine::fail(&format!("{}: {}", e.status, e.message)),
    });
}
