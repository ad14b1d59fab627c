// stats: the polyglot example's third step, in AssemblyScript with the SDK
// (plugins/sdk/assemblyscript): the total and the longest of the input's
// "lengths".
//
// Build, from the module root, with the packages make deps installs:
//
//   bin/npm/node_modules/.bin/asc plugins/examples/polyglot/stats/index.ts \
//     --config bin/npm/node_modules/@assemblyscript/wasi-shim/asconfig.json -O3 \
//     -o plugins/examples/polyglot/stats.wasm
import * as lh from "../../../sdk/assemblyscript/assembly/index";
import { Json, Kind } from "../../../sdk/assemblyscript/assembly/index";

function handle(req: lh.Request): lh.Outcome {
  const lengths = req.input.at("lengths");
  if (lengths.kind != Kind.Arr) return lh.fail("input.lengths must be an array of numbers");
  let total: i64 = 0;
  let longest: i64 = 0;
  for (let i = 0; i < lengths.items.length; i++) {
    const n = lengths.items[i].asI64(-1);
    if (n < 0) return lh.fail("input.lengths must be an array of whole numbers");
    total += n;
    if (n > longest) longest = n;
  }
  return lh.ok(Json.obj().set("lang", Json.str("assemblyscript")).set("total", Json.int(total)).set("longest", Json.int(longest)));
}

lh.run(handle);
