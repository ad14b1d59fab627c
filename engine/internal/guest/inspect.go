package guest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/lhengine/lhengine/fault"
)

// Info describes a plugin module, as `lhengine plugin inspect` shows it.
type Info struct {
	// ABI is the plugin ABI the module speaks: "1" when it imports from
	// lhengine_v1, "1 (envelope only)" when it imports nothing from the
	// host beyond WASI, and the other major version ("2") when it imports
	// lhengine_v2 and so cannot run here.
	ABI string
	// Command reports whether the module is a WASI command (exports _start).
	Command bool
	// Imports are the imported functions, in import order.
	Imports []Func
	// Exports are the exported functions, sorted by name.
	Exports []Func
	// MemoryMinPages and MemoryMaxPages are the declared limits of the
	// module's memory in 64 KiB pages; MemoryMaxPages is 0 when the module
	// declares no maximum.
	MemoryMinPages, MemoryMaxPages uint32
}

// Func is an imported or exported function. Module is empty for exports.
type Func struct {
	Module, Name    string
	Params, Results []string // "i32", "i64", "f32", "f64", "v128", "funcref", "externref"
}

// String renders f as "module.name(i32, i32) -> i32".
func (f Func) String() string {
	name := f.Name
	if f.Module != "" {
		name = f.Module + "." + f.Name
	}
	return name + "(" + strings.Join(f.Params, ", ") + ") -> (" + strings.Join(f.Results, ", ") + ")"
}

// Inspect decodes and validates a module without running it. It never
// panics on garbage.
//
// A module that is not valid Wasm gives a *fault.StepError of kind
// BadModule and a zero Info. A valid module that this engine would refuse
// to load gives its Info together with a *fault.StepError of kind
// ABIMismatch or BadModule saying why.
func Inspect(ctx context.Context, wasm []byte) (Info, error) {
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	if err := instantiateHostModules(ctx, rt); err != nil {
		return Info{}, fault.Wrap(fault.Internal, err, "instantiating host modules: "+err.Error())
	}
	compiled, err := compile(ctx, rt, wasm)
	if err != nil {
		return Info{}, err
	}
	defer compiled.Close(ctx)
	info, _, err := describe(wasm, compiled, provided(rt))
	return info, err
}

// compile compiles wasm on rt, turning any failure (even a panic of the
// decoder) into a BadModule fault.
func compile(ctx context.Context, rt wazero.Runtime, wasm []byte) (compiled wazero.CompiledModule, err error) {
	defer func() {
		if p := recover(); p != nil {
			compiled, err = nil, fault.New(fault.BadModule, "not a valid Wasm module: decoder failed: %v", p)
		}
	}()
	compiled, err = rt.CompileModule(ctx, wasm)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fault.Wrap(fault.Internal, err, "compiling the module: "+ctx.Err().Error())
		}
		return nil, fault.Wrap(fault.BadModule, err, "not a valid Wasm module: "+firstLine(err.Error()))
	}
	return compiled, nil
}

// describe builds the Info of a compiled module and checks it against the
// ABI; see Inspect for the errors.
func describe(wasm []byte, compiled wazero.CompiledModule, have map[string]map[string]signature) (Info, sections, error) {
	sec, err := scanSections(wasm)
	if err != nil {
		// wazero accepted what the scanner could not read: a bug here.
		return Info{}, sec, fault.Wrap(fault.Internal, err, "scanning a validated module: "+err.Error())
	}
	imported := compiled.ImportedFunctions()
	exported := compiled.ExportedFunctions()
	info := Info{
		ABI:            "1 (envelope only)",
		MemoryMinPages: sec.memMin,
		MemoryMaxPages: sec.memMax,
	}
	_, info.Command = exported["_start"]
	majors := map[string]bool{}
	for _, f := range imported {
		mod, name, _ := f.Import()
		info.Imports = append(info.Imports, funcOf(mod, name, f))
	}
	for _, im := range sec.imports {
		if m := abiModuleRe.FindStringSubmatch(im.module); m != nil {
			majors[m[1]] = true
		}
	}
	if len(majors) > 0 {
		var vs []string
		for v := range majors {
			vs = append(vs, v)
		}
		slices.Sort(vs)
		info.ABI = strings.Join(vs, ", ")
	}
	for name, f := range exported {
		info.Exports = append(info.Exports, funcOf("", name, f))
	}
	slices.SortFunc(info.Exports, func(a, b Func) int { return strings.Compare(a.Name, b.Name) })
	return info, sec, checkABI(sec.imports, imported, exported, have)
}

func funcOf(module, name string, f api.FunctionDefinition) Func {
	out := Func{Module: module, Name: name, Params: []string{}, Results: []string{}}
	for _, t := range f.ParamTypes() {
		out.Params = append(out.Params, api.ValueTypeName(t))
	}
	for _, t := range f.ResultTypes() {
		out.Results = append(out.Results, api.ValueTypeName(t))
	}
	return out
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// --- a minimal section scanner ---
//
// wazero's CompiledModule tells the imported and exported functions but not
// the other kinds of import, nor the limits of a memory that is not
// exported. The scanner reads just those from the binary. It is only given
// modules wazero has validated, but checks every bound anyway.

type externKind byte

const (
	externFunc   externKind = 0
	externTable  externKind = 1
	externMemory externKind = 2
	externGlobal externKind = 3
	externTag    externKind = 4
)

func (k externKind) String() string {
	switch k {
	case externFunc:
		return "function"
	case externTable:
		return "table"
	case externMemory:
		return "memory"
	case externGlobal:
		return "global"
	case externTag:
		return "tag"
	}
	return "extern kind " + strconv.Itoa(int(k))
}

type importEntry struct {
	module, name string
	kind         externKind
}

type sections struct {
	imports        []importEntry
	memMin, memMax uint32
}

var errTruncated = errors.New("truncated module")

type reader struct {
	b   []byte
	off int
}

func (r *reader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, errTruncated
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

func (r *reader) u32() (uint32, error) {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errors.New("bad LEB128")
}

func (r *reader) bytes(n uint32) ([]byte, error) {
	if uint64(r.off)+uint64(n) > uint64(len(r.b)) {
		return nil, errTruncated
	}
	b := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(n)
	return string(b), err
}

// limits reads memory or table limits and returns min and max (0 = none).
func (r *reader) limits() (uint32, uint32, error) {
	flags, err := r.byte()
	if err != nil {
		return 0, 0, err
	}
	lo, err := r.u32()
	if err != nil {
		return 0, 0, err
	}
	var hi uint32
	if flags&1 != 0 {
		if hi, err = r.u32(); err != nil {
			return 0, 0, err
		}
	}
	return lo, hi, nil
}

func scanSections(wasm []byte) (sections, error) {
	var out sections
	if len(wasm) < 8 {
		return out, errTruncated
	}
	r := &reader{b: wasm, off: 8}
	for r.off < len(r.b) {
		id, err := r.byte()
		if err != nil {
			return out, err
		}
		size, err := r.u32()
		if err != nil {
			return out, err
		}
		body, err := r.bytes(size)
		if err != nil {
			return out, err
		}
		s := &reader{b: body}
		switch id {
		case 2: // import
			if out.imports, err = scanImports(s); err != nil {
				return out, fmt.Errorf("import section: %w", err)
			}
		case 5: // memory
			count, err := s.u32()
			if err != nil {
				return out, err
			}
			if count > 0 {
				if out.memMin, out.memMax, err = s.limits(); err != nil {
					return out, fmt.Errorf("memory section: %w", err)
				}
			}
		}
	}
	return out, nil
}

func scanImports(s *reader) ([]importEntry, error) {
	count, err := s.u32()
	if err != nil {
		return nil, err
	}
	var out []importEntry
	for i := uint32(0); i < count; i++ {
		var im importEntry
		if im.module, err = s.name(); err != nil {
			return nil, err
		}
		if im.name, err = s.name(); err != nil {
			return nil, err
		}
		k, err := s.byte()
		if err != nil {
			return nil, err
		}
		im.kind = externKind(k)
		switch im.kind {
		case externFunc:
			_, err = s.u32()
		case externTable:
			if _, err = s.byte(); err == nil {
				_, _, err = s.limits()
			}
		case externMemory:
			_, _, err = s.limits()
		case externGlobal:
			if _, err = s.byte(); err == nil {
				_, err = s.byte()
			}
		case externTag:
			if _, err = s.byte(); err == nil {
				_, err = s.u32()
			}
		default:
			err = fmt.Errorf("unknown import kind %d", k)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, im)
	}
	return out, nil
}
