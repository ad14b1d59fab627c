// A JSON value with a parser and a serializer, for the lhengine
// AssemblyScript SDK (AssemblyScript has no JSON in its standard library).
// Objects keep their fields in order; numbers keep their text, so a number
// passes through unchanged.

export enum Kind {
  Null,
  Bool,
  Num,
  Str,
  Arr,
  Obj,
}

export class Json {
  kind: Kind = Kind.Null;
  boolValue: bool = false;
  /** The number's JSON text (Kind.Num) or the string (Kind.Str). */
  text: string = "";
  items: Array<Json> = [];
  keys: Array<string> = [];

  static null(): Json {
    return new Json();
  }
  static bool(b: bool): Json {
    const j = new Json();
    j.kind = Kind.Bool;
    j.boolValue = b;
    return j;
  }
  static str(s: string): Json {
    const j = new Json();
    j.kind = Kind.Str;
    j.text = s;
    return j;
  }
  static int(n: i64): Json {
    const j = new Json();
    j.kind = Kind.Num;
    j.text = n.toString();
    return j;
  }
  /** A number; NaN and infinities, which JSON lacks, are null. */
  static float(f: f64): Json {
    if (!isFinite(f)) return Json.null();
    const j = new Json();
    j.kind = Kind.Num;
    j.text = f == Math.floor(f) && Math.abs(f) < 1e15 ? (<i64>f).toString() : f.toString();
    return j;
  }
  static arr(items: Array<Json>): Json {
    const j = new Json();
    j.kind = Kind.Arr;
    j.items = items;
    return j;
  }
  /** An empty object; add fields with set. */
  static obj(): Json {
    const j = new Json();
    j.kind = Kind.Obj;
    return j;
  }

  /** Sets field key of an object (replacing it) and returns the object. */
  set(key: string, value: Json): Json {
    const i = this.keys.indexOf(key);
    if (i >= 0) {
      this.items[i] = value;
    } else {
      this.keys.push(key);
      this.items.push(value);
    }
    return this;
  }
  /** Field key of an object; null when missing or not an object. */
  get(key: string): Json | null {
    if (this.kind != Kind.Obj) return null;
    const i = this.keys.indexOf(key);
    return i < 0 ? null : this.items[i];
  }
  /** Field key of an object; a null Json when missing or not an object. */
  at(key: string): Json {
    const v = this.get(key);
    return v == null ? Json.null() : v;
  }
  get isNull(): bool {
    return this.kind == Kind.Null;
  }
  /** The string; "" for another kind. */
  asString(): string {
    return this.kind == Kind.Str ? this.text : "";
  }
  /** The number as a whole number; def for another kind or a fraction. */
  asI64(def: i64 = 0): i64 {
    if (this.kind != Kind.Num) return def;
    const f = parseFloat(this.text);
    return f == Math.floor(f) ? <i64>f : def;
  }
  asF64(def: f64 = 0): f64 {
    return this.kind == Kind.Num ? parseFloat(this.text) : def;
  }
  asBool(def: bool = false): bool {
    return this.kind == Kind.Bool ? this.boolValue : def;
  }

  /** The compact JSON text of the value. */
  toString(): string {
    const parts = new Array<string>();
    this.write(parts);
    return parts.join("");
  }

  private write(out: Array<string>): void {
    switch (this.kind) {
      case Kind.Null:
        out.push("null");
        break;
      case Kind.Bool:
        out.push(this.boolValue ? "true" : "false");
        break;
      case Kind.Num:
        out.push(this.text);
        break;
      case Kind.Str:
        out.push(quote(this.text));
        break;
      case Kind.Arr:
        out.push("[");
        for (let i = 0; i < this.items.length; i++) {
          if (i > 0) out.push(",");
          this.items[i].write(out);
        }
        out.push("]");
        break;
      default:
        out.push("{");
        for (let i = 0; i < this.keys.length; i++) {
          if (i > 0) out.push(",");
          out.push(quote(this.keys[i]));
          out.push(":");
          this.items[i].write(out);
        }
        out.push("}");
    }
  }

  /** Parses one JSON value surrounded by white space only; null when the
   * text is not JSON, with the reason in parseError. */
  static parse(text: string): Json | null {
    const p = new Parser(text);
    const v = p.value();
    if (v == null) {
      parseError = p.err;
      return null;
    }
    p.ws();
    if (p.i != text.length) {
      parseError = "unexpected data after the value at " + p.i.toString();
      return null;
    }
    return v;
  }
}

/** Why the last Json.parse returned null. */
export let parseError = "";

const HEX = "0123456789abcdef";

/** s as a JSON string, with its quotes. */
export function quote(s: string): string {
  const out = new Array<string>();
  out.push('"');
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c == 0x22 || c == 0x5c || c < 0x20) {
      out.push(s.substring(start, i));
      if (c == 0x22) out.push('\\"');
      else if (c == 0x5c) out.push("\\\\");
      else if (c == 0x0a) out.push("\\n");
      else if (c == 0x0d) out.push("\\r");
      else if (c == 0x09) out.push("\\t");
      else out.push("\\u00" + HEX.charAt(c >> 4) + HEX.charAt(c & 15));
      start = i + 1;
    }
  }
  out.push(s.substring(start));
  out.push('"');
  return out.join("");
}

const MAX_DEPTH = 512;

class Parser {
  i: i32 = 0;
  depth: i32 = 0;
  err: string = "";
  constructor(public s: string) {}

  ws(): void {
    while (this.i < this.s.length) {
      const c = this.s.charCodeAt(this.i);
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
      this.i++;
    }
  }
  fail(msg: string): Json | null {
    if (this.err == "") this.err = msg + " at " + this.i.toString();
    return null;
  }
  lit(word: string, v: Json): Json | null {
    if (this.s.substr(this.i, word.length) != word) return this.fail("bad literal");
    this.i += word.length;
    return v;
  }
  value(): Json | null {
    this.ws();
    if (this.i >= this.s.length) return this.fail("unexpected end of input");
    const c = this.s.charCodeAt(this.i);
    if (c == 0x6e) return this.lit("null", Json.null());
    if (c == 0x74) return this.lit("true", Json.bool(true));
    if (c == 0x66) return this.lit("false", Json.bool(false));
    if (c == 0x22) {
      const s = this.string();
      return s == null ? null : Json.str(s);
    }
    if (c == 0x5b || c == 0x7b) {
      if (++this.depth > MAX_DEPTH) return this.fail("nested too deep");
      const v = c == 0x5b ? this.array() : this.object();
      this.depth--;
      return v;
    }
    return this.number();
  }
  array(): Json | null {
    this.i++;
    const a = Json.arr([]);
    this.ws();
    if (this.i < this.s.length && this.s.charCodeAt(this.i) == 0x5d) {
      this.i++;
      return a;
    }
    for (;;) {
      const v = this.value();
      if (v == null) return null;
      a.items.push(v);
      this.ws();
      if (this.i >= this.s.length) return this.fail("unterminated array");
      const c = this.s.charCodeAt(this.i++);
      if (c == 0x5d) return a;
      if (c != 0x2c) return this.fail("expected ',' or ']'");
    }
    return null; // not reached
  }
  object(): Json | null {
    this.i++;
    const o = Json.obj();
    this.ws();
    if (this.i < this.s.length && this.s.charCodeAt(this.i) == 0x7d) {
      this.i++;
      return o;
    }
    for (;;) {
      this.ws();
      if (this.i >= this.s.length || this.s.charCodeAt(this.i) != 0x22) return this.fail("expected a field name");
      const k = this.string();
      if (k == null) return null;
      this.ws();
      if (this.i >= this.s.length || this.s.charCodeAt(this.i) != 0x3a) return this.fail("expected ':'");
      this.i++;
      const v = this.value();
      if (v == null) return null;
      o.keys.push(k);
      o.items.push(v);
      this.ws();
      if (this.i >= this.s.length) return this.fail("unterminated object");
      const c = this.s.charCodeAt(this.i++);
      if (c == 0x7d) return o;
      if (c != 0x2c) return this.fail("expected ',' or '}'");
    }
    return null; // not reached
  }
  number(): Json | null {
    const start = this.i;
    while (this.i < this.s.length) {
      const c = this.s.charCodeAt(this.i);
      if (!((c >= 0x30 && c <= 0x39) || c == 0x2d || c == 0x2b || c == 0x2e || c == 0x65 || c == 0x45)) break;
      this.i++;
    }
    const text = this.s.substring(start, this.i);
    if (text.length == 0 || !validNumber(text)) {
      this.i = start;
      return this.fail("bad number");
    }
    const j = new Json();
    j.kind = Kind.Num;
    j.text = text;
    return j;
  }
  string(): string | null {
    this.i++; // the opening quote
    const out = new Array<string>();
    let start = this.i;
    for (;;) {
      if (this.i >= this.s.length) {
        this.fail("unterminated string");
        return null;
      }
      const c = this.s.charCodeAt(this.i);
      if (c == 0x22) {
        out.push(this.s.substring(start, this.i));
        this.i++;
        return out.join("");
      }
      if (c < 0x20) {
        this.fail("control character in a string");
        return null;
      }
      if (c != 0x5c) {
        this.i++;
        continue;
      }
      out.push(this.s.substring(start, this.i));
      const e = this.i + 1 < this.s.length ? this.s.charCodeAt(this.i + 1) : 0;
      this.i += 2;
      if (e == 0x6e) out.push("\n");
      else if (e == 0x74) out.push("\t");
      else if (e == 0x72) out.push("\r");
      else if (e == 0x62) out.push("\b");
      else if (e == 0x66) out.push("\f");
      else if (e == 0x22 || e == 0x5c || e == 0x2f) out.push(String.fromCharCode(e));
      else if (e == 0x75) {
        let cp: i32 = 0;
        for (let k = 0; k < 4; k++) {
          const h = this.i < this.s.length ? this.s.charCodeAt(this.i++) : -1;
          let d: i32 = -1;
          if (h >= 0x30 && h <= 0x39) d = h - 0x30;
          else if (h >= 0x61 && h <= 0x66) d = h - 0x61 + 10;
          else if (h >= 0x41 && h <= 0x46) d = h - 0x41 + 10;
          if (d < 0) {
            this.fail("bad \\u escape");
            return null;
          }
          cp = (cp << 4) | d;
        }
        out.push(String.fromCharCode(cp)); // surrogate halves pair up in the UTF-16 string
      } else {
        this.fail("bad escape");
        return null;
      }
      start = this.i;
    }
    return null; // not reached
  }
}

// validNumber checks the JSON number grammar: -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
function validNumber(t: string): bool {
  let i = 0;
  const n = t.length;
  if (i < n && t.charCodeAt(i) == 0x2d) i++;
  if (i >= n) return false;
  if (t.charCodeAt(i) == 0x30) i++;
  else {
    if (!isDigit(t, i)) return false;
    while (isDigit(t, i)) i++;
  }
  if (i < n && t.charCodeAt(i) == 0x2e) {
    i++;
    if (!isDigit(t, i)) return false;
    while (isDigit(t, i)) i++;
  }
  if (i < n && (t.charCodeAt(i) == 0x65 || t.charCodeAt(i) == 0x45)) {
    i++;
    if (i < n && (t.charCodeAt(i) == 0x2b || t.charCodeAt(i) == 0x2d)) i++;
    if (!isDigit(t, i)) return false;
    while (isDigit(t, i)) i++;
  }
  return i == n;
}

function isDigit(t: string, i: i32): bool {
  if (i >= t.length) return false;
  const c = t.charCodeAt(i);
  return c >= 0x30 && c <= 0x39;
}
