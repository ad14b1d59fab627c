//! lhengine: the Rust SDK for lhengine step plugins (plugin ABI v1,
//! specs/abi.md). Standard library only, one file: build it as a crate with
//! rustc, no cargo.
//!
//! ```text
//! rustc --target wasm32-wasi -O --edition 2021 --crate-type rlib --crate-name lhengine lib.rs -o liblhengine.rlib
//! rustc --target wasm32-wasi -O --edition 2021 -C strip=debuginfo --extern lhengine=liblhengine.rlib main.rs -o plugin.wasm
//! ```
//!
//! A plugin calls [`run`] with a handler; the handler gets the decoded
//! [`Request`] and returns an [`Outcome`]: [`ok`], [`needs_repair`] or
//! [`fail`]. Host calls ([`log`], [`count`], [`note`], [`kv_get`],
//! [`kv_put`], [`fetch`], [`effect`], [`generate`], [`request_approval`],
//! [`put_artifact`], [`read_artifact`]) return `Result<_, Error>`, where
//! [`Error`] carries the status code and the host's `last_error` message.
//! JSON is the crate's own small [`Json`] value with [`Json::parse`] and
//! [`Json::to_string`].

use std::fmt;
use std::io::{Read, Write};

/// The ABI major version this crate speaks; the host module is `lhengine_v1`.
pub const ABI: i32 = 1;

/// Status codes a host call fails with (specs/abi.md, "Status codes").
pub const ERR_RANGE: i32 = -1;
pub const ERR_TOO_LARGE: i32 = -2;
pub const ERR_INVALID: i32 = -3;
pub const ERR_DENIED: i32 = -4;
pub const ERR_NOT_FOUND: i32 = -5;
pub const ERR_LEASE_LOST: i32 = -6;
pub const ERR_BUDGET: i32 = -7;
pub const ERR_UNAVAILABLE: i32 = -8;
pub const ERR_INTERNAL: i32 = -9;
pub const ERR_PAUSED: i32 = -10;

/// Largest message [`log`] passes, in bytes; longer ones are cut.
pub const LOG_MAX: usize = 4096;

mod host {
    #[link(wasm_import_module = "lhengine_v1")]
    extern "C" {
        pub fn version() -> i32;
        pub fn log(level: i32, ptr: *const u8, len: i32) -> i32;
        pub fn heartbeat() -> i32;
        pub fn result(out: *mut u8, cap: i32) -> i32;
        pub fn call(name: *const u8, name_len: i32, req: *const u8, req_len: i32, out: *mut u8, cap: i32) -> i32;
        pub fn artifact_put(meta: *const u8, meta_len: i32, data: *const u8, data_len: i32, out: *mut u8, cap: i32) -> i32;
        pub fn artifact_read(r: *const u8, r_len: i32, offset: i64, out: *mut u8, cap: i32) -> i32;
        pub fn last_error(out: *mut u8, cap: i32) -> i32;
    }
}

/// A JSON value. Objects keep their fields in order; numbers keep their
/// text, so a number passes through unchanged.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// An object of the given fields.
    pub fn obj(fields: Vec<(&str, Json)>) -> Json {
        Json::Obj(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }
    /// A string.
    pub fn str(s: &str) -> Json {
        Json::Str(s.to_string())
    }
    /// A whole number.
    pub fn int(n: i64) -> Json {
        Json::Num(n.to_string())
    }
    /// A number; NaN and infinities, which JSON lacks, are null.
    pub fn float(f: f64) -> Json {
        if f.is_finite() {
            Json::Num(format!("{}", f))
        } else {
            Json::Null
        }
    }
    /// The field key of an object; None for a missing field or a non-object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Json::Num(n) => n.parse::<i64>().ok().or_else(|| n.parse::<f64>().ok().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| f as i64)),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Num(n) => n.parse::<f64>().ok(),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&Vec<Json>> {
        match self {
            Json::Arr(a) => Some(a),
            _ => None,
        }
    }
    /// Parses one JSON value (RFC 8259), surrounded by white space only.
    pub fn parse(text: &[u8]) -> Result<Json, String> {
        let mut p = Parser { b: text, i: 0, depth: 0 };
        let v = p.value()?;
        p.ws();
        if p.i != text.len() {
            return Err(format!("unexpected data after the value at byte {}", p.i));
        }
        Ok(v)
    }
    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Num(n) => out.push_str(n),
            Json::Str(s) => write_str(s, out),
            Json::Arr(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
            Json::Obj(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(k, out);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

impl fmt::Display for Json {
    /// The compact JSON text of the value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write(&mut s);
        f.write_str(&s)
    }
}

fn write_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

const MAX_DEPTH: usize = 512;

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> Result<(), String> {
        self.ws();
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.i))
        }
    }
    fn lit(&mut self, word: &str, v: Json) -> Result<Json, String> {
        if self.b[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(format!("bad literal at byte {}", self.i))
        }
    }
    fn value(&mut self) -> Result<Json, String> {
        self.ws();
        match self.b.get(self.i) {
            None => Err("unexpected end of input".to_string()),
            Some(b'n') => self.lit("null", Json::Null),
            Some(b't') => self.lit("true", Json::Bool(true)),
            Some(b'f') => self.lit("false", Json::Bool(false)),
            Some(b'"') => self.string().map(Json::Str),
            Some(b'[') | Some(b'{') => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err("nested too deep".to_string());
                }
                let v = if self.b[self.i] == b'[' { self.array() } else { self.object() };
                self.depth -= 1;
                v
            }
            Some(_) => self.number(),
        }
    }
    fn array(&mut self) -> Result<Json, String> {
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(Json::Arr(items));
        }
        loop {
            items.push(self.value()?);
            self.ws();
            if self.b.get(self.i) == Some(&b',') {
                self.i += 1;
                continue;
            }
            self.eat(b']')?;
            return Ok(Json::Arr(items));
        }
    }
    fn object(&mut self) -> Result<Json, String> {
        self.i += 1;
        let mut fields = Vec::new();
        self.ws();
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(Json::Obj(fields));
        }
        loop {
            self.ws();
            let k = self.string()?;
            self.eat(b':')?;
            fields.push((k, self.value()?));
            self.ws();
            if self.b.get(self.i) == Some(&b',') {
                self.i += 1;
                continue;
            }
            self.eat(b'}')?;
            return Ok(Json::Obj(fields));
        }
    }
    fn number(&mut self) -> Result<Json, String> {
        let start = self.i;
        while self.i < self.b.len() && matches!(self.b[self.i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.b[start..self.i]).unwrap_or("");
        if text.is_empty() || text.parse::<f64>().is_err() || text.starts_with('+') || text.starts_with('.') {
            return Err(format!("bad number at byte {}", start));
        }
        Ok(Json::Num(text.to_string()))
    }
    fn string(&mut self) -> Result<String, String> {
        self.eat(b'"')?;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let c = *self.b.get(self.i).ok_or("unterminated string")?;
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).map_err(|e| e.to_string()),
                b'\\' => {
                    let e = *self.b.get(self.i).ok_or("unterminated escape")?;
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xD800..0xDC00).contains(&cp) && self.b[self.i..].starts_with(b"\\u") {
                                self.i += 2;
                                let lo = self.hex4()?;
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3FF);
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return Err(format!("bad escape at byte {}", self.i - 1)),
                    }
                }
                c if c < 0x20 => return Err(format!("control character in a string at byte {}", self.i - 1)),
                _ => out.push(c),
            }
        }
    }
    fn hex4(&mut self) -> Result<u32, String> {
        let s = self.b.get(self.i..self.i + 4).ok_or("short \\u escape")?;
        self.i += 4;
        u32::from_str_radix(std::str::from_utf8(s).unwrap_or("x"), 16).map_err(|e| e.to_string())
    }
}

/// The fan-out item a step runs for.
#[derive(Clone, Debug)]
pub struct Item {
    pub index: i64,
    pub key: Json,
    pub value: Json,
}

/// Why the task came back to this step.
#[derive(Clone, Debug)]
pub struct Repair {
    pub count: i64,
    pub reason: String,
}

/// The request of one attempt (specs/abi.md section 3).
#[derive(Clone, Debug)]
pub struct Request {
    pub task_id: String,
    pub task_name: String,
    pub step: String,
    /// None unless the step fans out.
    pub item: Option<Item>,
    /// 1 on the unit's first attempt.
    pub attempt: i64,
    /// None on the first pass.
    pub repair: Option<Repair>,
    /// The step's input; Null when it has none.
    pub input: Json,
    /// The parameters the run's harness policies hand to this step (an object).
    pub policy: Json,
    /// When the attempt was leased (RFC 3339, UTC); "" when the request has none.
    pub now: String,
    /// The task's environment facts, by name; empty without an environment block.
    pub environment: Vec<(String, String)>,
    /// The task's objective and constraints, verbatim; keep them whole.
    pub objective: String,
    pub constraints: Vec<String>,
    /// The whole request as it came.
    pub raw: Json,
}

impl Request {
    /// Decodes a request envelope.
    pub fn decode(raw: Json) -> Result<Request, String> {
        if !matches!(raw, Json::Obj(_)) {
            return Err("the request is not a JSON object".to_string());
        }
        let s = |k: &str| raw.get(k).and_then(Json::as_str).unwrap_or("").to_string();
        let item = match raw.get("item") {
            Some(it @ Json::Obj(_)) => Some(Item {
                index: it.get("index").and_then(Json::as_i64).unwrap_or(0),
                key: it.get("key").cloned().unwrap_or(Json::Null),
                value: it.get("value").cloned().unwrap_or(Json::Null),
            }),
            _ => None,
        };
        let repair = match raw.get("repair") {
            Some(r @ Json::Obj(_)) => Some(Repair {
                count: r.get("count").and_then(Json::as_i64).unwrap_or(0),
                reason: r.get("reason").and_then(Json::as_str).unwrap_or("").to_string(),
            }),
            _ => None,
        };
        let environment = match raw.get("environment") {
            Some(Json::Obj(fields)) => fields.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect(),
            _ => Vec::new(),
        };
        let constraints = raw
            .get("constraints")
            .and_then(Json::as_array)
            .map(|a| a.iter().filter_map(|c| c.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        Ok(Request {
            task_id: s("task_id"),
            task_name: s("task_name"),
            step: s("step"),
            item,
            attempt: raw.get("attempt").and_then(Json::as_i64).unwrap_or(0),
            repair,
            input: raw.get("input").cloned().unwrap_or(Json::Null),
            policy: raw.get("policy").cloned().unwrap_or(Json::Obj(Vec::new())),
            now: s("now"),
            environment,
            objective: s("objective"),
            constraints,
            raw: raw.clone(),
        })
    }

    /// The policy parameter name; None when no policy sets it.
    pub fn policy_param(&self, name: &str) -> Option<&Json> {
        self.policy.get(name)
    }
}

/// What a handler returns.
#[derive(Clone, Debug)]
pub enum Outcome {
    Ok(Json),
    NeedsRepair(String),
    Fail(String),
}

/// Success with output.
pub fn ok(output: Json) -> Outcome {
    Outcome::Ok(output)
}
/// The step's check failed: the step's repair block applies.
pub fn needs_repair(reason: &str) -> Outcome {
    Outcome::NeedsRepair(reason.to_string())
}
/// The step failed, kind plugin_error, with message; its retry block may try again.
pub fn fail(message: &str) -> Outcome {
    Outcome::Fail(message.to_string())
}

impl From<Error> for Outcome {
    fn from(e: Error) -> Outcome {
        Outcome::Fail(e.to_string())
    }
}

/// The result object of an outcome (specs/abi.md, "Result").
pub fn result_json(o: &Outcome) -> Json {
    match o {
        Outcome::Ok(v) => Json::obj(vec![("output", v.clone())]),
        Outcome::NeedsRepair(r) => Json::obj(vec![("needs_repair", Json::Bool(true)), ("reason", Json::str(r))]),
        Outcome::Fail(m) => Json::obj(vec![("error", Json::str(m))]),
    }
}

/// Reads the request from stdin, runs handler and writes its result to
/// stdout. A request that cannot be read or decoded fails the step.
pub fn run<F: FnOnce(&Request) -> Outcome>(handler: F) {
    let mut raw = Vec::new();
    let outcome = match std::io::stdin().read_to_end(&mut raw) {
        Err(e) => fail(&format!("reading the request: {}", e)),
        Ok(_) => match Json::parse(&raw).and_then(Request::decode) {
            Err(e) => fail(&format!("decoding the request: {}", e)),
            Ok(req) => handler(&req),
        },
    };
    let mut out = result_json(&outcome).to_string();
    out.push('\n');
    let _ = std::io::stdout().write_all(out.as_bytes());
}

/// A refused host call: its status code and the host's message.
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    pub status: i32,
    pub message: String,
}

impl Error {
    /// Whether the task is pausing for a person (approval.request): return at once.
    pub fn is_paused(&self) -> bool {
        self.status == ERR_PAUSED
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host call failed ({}): {}", self.status, self.message)
    }
}

fn host_error(status: i32) -> Error {
    let mut buf = vec![0u8; 4096];
    let n = unsafe { host::last_error(buf.as_mut_ptr(), buf.len() as i32) };
    let message = if n > 0 && (n as usize) <= buf.len() { String::from_utf8_lossy(&buf[..n as usize]).into_owned() } else { String::new() };
    Error { status, message }
}

/// Fetches an output-convention result of length rc when it did not fit buf.
fn finish(rc: i32, mut buf: Vec<u8>) -> Result<Vec<u8>, Error> {
    if rc < 0 {
        return Err(host_error(rc));
    }
    let n = rc as usize;
    if n > buf.len() {
        buf = vec![0u8; n];
        let r = unsafe { host::result(buf.as_mut_ptr(), n as i32) };
        if r < 0 {
            return Err(host_error(r));
        }
    }
    buf.truncate(n);
    Ok(buf)
}

/// Log levels.
#[derive(Clone, Copy, Debug)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

/// The host's ABI version: 1.
pub fn version() -> i32 {
    unsafe { host::version() }
}

/// Appends msg to the step's log at level, cut to LOG_MAX bytes.
pub fn log(level: Level, msg: &str) -> Result<(), Error> {
    let mut end = msg.len().min(LOG_MAX);
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    let rc = unsafe { host::log(level as i32, msg.as_ptr(), end as i32) };
    if rc < 0 {
        return Err(host_error(rc));
    }
    Ok(())
}

/// Renews the work unit's lease; ERR_LEASE_LOST means stop.
pub fn heartbeat() -> Result<(), Error> {
    let rc = unsafe { host::heartbeat() };
    if rc < 0 {
        return Err(host_error(rc));
    }
    Ok(())
}

/// Performs capability name with the JSON request req and returns its response.
pub fn call(name: &str, req: &Json) -> Result<Json, Error> {
    let out = call_raw(name, req.to_string().as_bytes())?;
    Json::parse(&out).map_err(|e| Error { status: ERR_INTERNAL, message: format!("{} answered bad JSON: {}", name, e) })
}

/// Performs capability name with the request bytes req as they are and
/// returns the response's bytes.
pub fn call_raw(name: &str, req: &[u8]) -> Result<Vec<u8>, Error> {
    let mut buf = vec![0u8; 4096];
    let rc = unsafe { host::call(name.as_ptr(), name.len() as i32, req.as_ptr(), req.len() as i32, buf.as_mut_ptr(), buf.len() as i32) };
    finish(rc, buf)
}

/// The host's message about this attempt's most recent failed call; "" when none failed.
pub fn last_error() -> String {
    host_error(0).message
}

/// Adds delta to the task's progress counter name ("progress.count").
pub fn count(name: &str, delta: i64) -> Result<(), Error> {
    call("progress.count", &Json::obj(vec![("name", Json::str(name)), ("delta", Json::int(delta))])).map(|_| ())
}

/// Proposes a progress note ("progress.note") of kind "finding", "decision" or "blocker".
pub fn note(kind: &str, text: &str) -> Result<(), Error> {
    call("progress.note", &Json::obj(vec![("kind", Json::str(kind)), ("text", Json::str(text))])).map(|_| ())
}

/// Reads key of the work unit's key-value state ("kv.get"); None when unset.
pub fn kv_get(key: &str) -> Result<Option<Json>, Error> {
    let r = call("kv.get", &Json::obj(vec![("key", Json::str(key))]))?;
    if r.get("found").and_then(Json::as_bool) == Some(true) {
        Ok(Some(r.get("value").cloned().unwrap_or(Json::Null)))
    } else {
        Ok(None)
    }
}

/// Sets key of the work unit's key-value state ("kv.put").
pub fn kv_put(key: &str, value: &Json) -> Result<(), Error> {
    call("kv.put", &Json::obj(vec![("key", Json::str(key)), ("value", value.clone())])).map(|_| ())
}

/// A request without side effects to an allowlisted host ("http.fetch"):
/// req is {"method","url","headers"}; the response {"status","headers","body",...}.
pub fn fetch(req: &Json) -> Result<Json, Error> {
    call("http.fetch", req)
}

/// Performs a side effect once per key ("effect.do", kind "http" or "file")
/// and returns {"result":{...},"replayed":bool}.
pub fn effect(key: &str, kind: &str, request: &Json) -> Result<Json, Error> {
    call("effect.do", &Json::obj(vec![("key", Json::str(key)), ("kind", Json::str(kind)), ("request", request.clone())]))
}

/// Calls a granted model ("model.generate").
pub fn generate(req: &Json) -> Result<Json, Error> {
    call("model.generate", req)
}

/// Asks a person to decide ("approval.request"). The first call fails with
/// ERR_PAUSED ([`Error::is_paused`]): return from the step at once; once a
/// person decided, the step runs again and the call returns the decision.
pub fn request_approval(req: &Json) -> Result<Json, Error> {
    call("approval.request", req)
}

/// Stores data as an artifact and returns its ref ("sha256:...").
pub fn put_artifact(name: &str, media_type: &str, data: &[u8]) -> Result<String, Error> {
    let meta = Json::obj(vec![("name", Json::str(name)), ("media_type", Json::str(media_type))]).to_string();
    let mut buf = vec![0u8; 1024];
    let rc = unsafe { host::artifact_put(meta.as_ptr(), meta.len() as i32, data.as_ptr(), data.len() as i32, buf.as_mut_ptr(), buf.len() as i32) };
    let out = finish(rc, buf)?;
    let v = Json::parse(&out).map_err(|e| Error { status: ERR_INTERNAL, message: e })?;
    Ok(v.get("ref").and_then(Json::as_str).unwrap_or("").to_string())
}

/// Reads a whole artifact of this task.
pub fn read_artifact(r: &str) -> Result<Vec<u8>, Error> {
    let mut data = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = unsafe { host::artifact_read(r.as_ptr(), r.len() as i32, data.len() as i64, buf.as_mut_ptr(), buf.len() as i32) };
        if n < 0 {
            return Err(host_error(n));
        }
        if n == 0 {
            return Ok(data);
        }
        data.extend_from_slice(&buf[..n as usize]);
    }
}
