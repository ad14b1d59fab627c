// lengths: the polyglot example's second step, in Rust with the crate
// lhengine (plugins/sdk/rust): the length of each word of the input's
// "words", in characters.
//
// Build, from the module root (rustc and no cargo; rustc 1.78 and later call
// the target wasm32-wasip1):
//
//   rustc --target wasm32-wasi -O --edition 2021 --crate-type rlib --crate-name lhengine plugins/sdk/rust/lib.rs -o liblhengine.rlib
//   rustc --target wasm32-wasi -O --edition 2021 -C strip=debuginfo --extern lhengine=liblhengine.rlib \
//     plugins/examples/polyglot/lengths/main.rs -o plugins/examples/polyglot/lengths.wasm

use lhengine::{Json, Outcome, Request};

fn handle(req: &Request) -> Outcome {
    let words = match req.input.get("words").and_then(|w| w.as_array()) {
        Some(w) => w,
        None => return lhengine::fail("input.words must be an array of strings"),
    };
    let mut lengths = Vec::with_capacity(words.len());
    for w in words {
        match w.as_str() {
            Some(s) => lengths.push(Json::int(s.chars().count() as i64)),
            None => return lhengine::fail("input.words must be an array of strings"),
        }
    }
    lhengine::ok(Json::obj(vec![("lang", Json::str("rust")), ("lengths", Json::Arr(lengths))]))
}

fn main() {
    lhengine::run(handle);
}
