// A Rust plugin for lhengine: std only, no crates. It reads the request
// envelope from stdin, calls the host functions of the lhengine_v1 module
// and writes one JSON result to stdout (specs/abi.md). Modes of the input
// {"mode": ...}:
//
//   echo    the output is {"step", "attempt", "item", "input"} of the request
//   log     logs "hello from rust" at info, heartbeats, and reports the
//           heartbeat's status and the host's ABI version
//   error   {"error": "requested error"}
//   repair  {"needs_repair": true, "reason": "requested repair"}
//   panic   panics: std aborts, which traps
//   clock   reads the wall clock, sleeps 30 s and reports the wall time and
//           how much the monotonic clock advanced across the sleep (the
//           engine's guest clock is deterministic: the sleep returns at once)
//
// Build (Debian bookworm: rustc 1.63 and libstd-rust-dev-wasm32):
//
//   rustc --target wasm32-wasi -O --edition 2021 -C strip=debuginfo main.rs -o conformance.wasm

use std::io::{Read, Write};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[link(wasm_import_module = "lhengine_v1")]
extern "C" {
    fn version() -> i32;
    fn log(level: i32, ptr: *const u8, len: i32) -> i32;
    fn heartbeat() -> i32;
}

const INFO: i32 = 1;

/// A JSON value, keeping object fields in their order.
#[derive(Clone)]
enum Json {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
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

fn write_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A JSON parser over the request's bytes; enough for any valid JSON.
struct Parser<'a> {
    b: &'a [u8],
    i: usize,
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
            Some(b'[') => {
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
            Some(b'{') => {
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
            Some(_) => {
                let start = self.i;
                while self.i < self.b.len() && matches!(self.b[self.i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                    self.i += 1;
                }
                if start == self.i {
                    return Err(format!("unexpected byte at {}", start));
                }
                Ok(Json::Num(String::from_utf8_lossy(&self.b[start..self.i]).into_owned()))
            }
        }
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
                        other => out.push(other),
                    }
                }
                _ => out.push(c),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let s = self.b.get(self.i..self.i + 4).ok_or("short \\u escape")?;
        self.i += 4;
        u32::from_str_radix(&String::from_utf8_lossy(s), 16).map_err(|e| e.to_string())
    }
}

fn host_log(level: i32, msg: &str) -> i32 {
    unsafe { log(level, msg.as_ptr(), msg.len() as i32) }
}

fn run(req: &Json) -> Json {
    let input = req.get("input");
    let mode = match input.and_then(|i| i.get("mode")) {
        Some(Json::Str(m)) => m.as_str(),
        _ => "",
    };
    let field = |k: &str| req.get(k).cloned().unwrap_or(Json::Null);
    match mode {
        "echo" => Json::Obj(vec![(
            "output".to_string(),
            Json::Obj(vec![
                ("step".to_string(), field("step")),
                ("attempt".to_string(), field("attempt")),
                ("item".to_string(), field("item")),
                ("input".to_string(), field("input")),
            ]),
        )]),
        "log" => {
            let logged = host_log(INFO, "hello from rust");
            let beat = unsafe { heartbeat() };
            let v = unsafe { version() };
            Json::Obj(vec![(
                "output".to_string(),
                Json::Obj(vec![
                    ("log".to_string(), Json::Num(logged.to_string())),
                    ("heartbeat".to_string(), Json::Num(beat.to_string())),
                    ("version".to_string(), Json::Num(v.to_string())),
                ]),
            )])
        }
        "error" => Json::Obj(vec![("error".to_string(), Json::Str("requested error".to_string()))]),
        "repair" => Json::Obj(vec![
            ("needs_repair".to_string(), Json::Bool(true)),
            ("reason".to_string(), Json::Str("requested repair".to_string())),
        ]),
        "panic" => panic!("requested panic"),
        "clock" => {
            let wall = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
            let start = Instant::now();
            std::thread::sleep(Duration::from_secs(30));
            let slept = start.elapsed().as_millis();
            Json::Obj(vec![(
                "output".to_string(),
                Json::Obj(vec![
                    ("wall_secs".to_string(), Json::Num(wall.to_string())),
                    ("slept_ms".to_string(), Json::Num(slept.to_string())),
                ]),
            )])
        }
        _ => Json::Obj(vec![("error".to_string(), Json::Str(format!("unknown mode {:?}", mode)))]),
    }
}

fn main() {
    let mut raw = Vec::new();
    let result = match std::io::stdin().read_to_end(&mut raw) {
        Err(e) => Json::Obj(vec![("error".to_string(), Json::Str(format!("reading the request: {}", e)))]),
        Ok(_) => match (Parser { b: &raw, i: 0 }).value() {
            Err(e) => Json::Obj(vec![("error".to_string(), Json::Str(format!("parsing the request: {}", e)))]),
            Ok(req) => run(&req),
        },
    };
    let mut out = String::new();
    result.write(&mut out);
    out.push('\n');
    std::io::stdout().write_all(out.as_bytes()).expect("writing the result");
}
