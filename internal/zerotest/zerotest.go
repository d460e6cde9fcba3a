// Package zerotest calls every exported method of a package's types on
// values the package did not make — a zero value and a nil pointer — and
// reports each call that panics. The project's rule is that bad input gets
// an error, never a panic, and a receiver nobody constructed is bad input
// too: `var d cuda.Device; d.Alloc(...)` compiles, so it must not crash.
//
// Methods are found by reflection and arguments are built from their
// types, so a method added later is called without touching the tests; the
// list of types is checked against the package's source, so a type added
// later fails the test until it is listed.
package zerotest

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Options are a package's exceptions.
type Options struct {
	// Args, by "Type.Method", replaces the arguments built from the
	// method's types, for a method whose zero arguments would make the
	// call block (a done func that never reports done).
	Args map[string][]any
}

// The receivers a method is called on.
const (
	Zero    = "zero"     // a pointer to a zero value
	Nil     = "nil"      // a nil pointer, for a method with a pointer receiver
	AllOnes = "all-ones" // an integer type with every bit set: an enum out of range
)

// Call is one method call and what came of it.
type Call struct {
	Type, Method string
	Recv         string // Zero, Nil or AllOnes
	Panic        any    // what the call panicked with, or nil
	Err          error  // the last result, when it is an error
	ReturnsErr   bool   // the method's last result is an error
}

func (c Call) String() string {
	recv := map[string]string{Zero: "a zero " + c.Type, Nil: "a nil *" + c.Type, AllOnes: "an all-ones " + c.Type}[c.Recv]
	return fmt.Sprintf("%s.%s on %s", c.Type, c.Method, recv)
}

var (
	ctxType   = reflect.TypeFor[context.Context]()
	errorType = reflect.TypeFor[error]()
)

// Run calls, for each value (a pointer to a zero value of each type: new(T)),
// every exported method on that zero value, for the methods with a pointer
// receiver on a nil *T, and for an integer type on the value with every
// bit set (no enum goes that far). It fails the test listing every call that
// panicked, and every exported type with exported methods declared in the
// package in the working directory that values leaves out. The calls are
// returned so a package can check the errors too.
func Run(t *testing.T, values []any, o Options) []Call {
	t.Helper()
	listed := map[string]bool{}
	var calls []Call
	for _, v := range values {
		pt := reflect.TypeOf(v)
		if pt == nil || pt.Kind() != reflect.Pointer {
			t.Fatalf("zerotest: %T is not a pointer to a zero value (pass new(T))", v)
		}
		typ := pt.Elem()
		listed[typ.Name()] = true
		valueMethods := map[string]bool{}
		for m := range typ.Methods() {
			valueMethods[m.Name] = true
		}
		for i := range pt.NumMethod() {
			m := pt.Method(i)
			key := typ.Name() + "." + m.Name
			calls = append(calls, call(t, reflect.New(typ), i, typ.Name(), m.Name, Zero, o.Args[key]))
			if !valueMethods[m.Name] {
				calls = append(calls, call(t, reflect.Zero(pt), i, typ.Name(), m.Name, Nil, o.Args[key]))
			}
			if ones, ok := allOnes(typ); ok {
				calls = append(calls, call(t, ones, i, typ.Name(), m.Name, AllOnes, o.Args[key]))
			}
		}
	}
	var panicked []string
	for _, c := range calls {
		if c.Panic != nil {
			panicked = append(panicked, fmt.Sprintf("%v: panic: %v", c, c.Panic))
		}
	}
	if len(panicked) > 0 {
		sort.Strings(panicked)
		t.Errorf("%d of %d calls on receivers not made by a constructor panicked:\n\t%s",
			len(panicked), len(calls), strings.Join(panicked, "\n\t"))
	}
	for _, name := range declared(t) {
		if !listed[name] {
			t.Errorf("type %s has exported methods but is not in the list of values: add new(%s)", name, name)
		}
	}
	return calls
}

// call calls method i of recv with harmless arguments (or args) and
// recovers a panic, including one from ranging over an iterator it
// returns.
func call(t *testing.T, recv reflect.Value, i int, typ, name, kind string, args []any) (c Call) {
	t.Helper()
	c = Call{Type: typ, Method: name, Recv: kind}
	fn := recv.Method(i)
	ft := fn.Type()
	c.ReturnsErr = ft.NumOut() > 0 && ft.Out(ft.NumOut()-1) == errorType
	in, err := arguments(ft, args)
	if err != nil {
		t.Fatalf("zerotest: %s.%s: %v", typ, name, err)
	}
	defer func() { c.Panic = recover() }()
	out := fn.Call(in)
	if c.ReturnsErr {
		c.Err, _ = out[len(out)-1].Interface().(error)
	}
	for _, r := range out {
		drain(r)
	}
	return c
}

// allOnes is a pointer to typ's value with every bit set, for an integer
// typ.
func allOnes(typ reflect.Type) (reflect.Value, bool) {
	v := reflect.New(typ)
	switch typ.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.Elem().SetInt(-1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.Elem().SetUint(^uint64(0))
	default:
		return reflect.Value{}, false
	}
	return v, true
}

// arguments builds the call's arguments: args as given, or else the zero
// value of each parameter (nil for pointers, interfaces, slices and maps),
// context.Background() for a context, and for a func a func that returns
// zero values. A variadic parameter gets no arguments.
func arguments(ft reflect.Type, args []any) ([]reflect.Value, error) {
	n := ft.NumIn()
	if ft.IsVariadic() {
		n--
	}
	if args != nil {
		if len(args) != n {
			return nil, fmt.Errorf("%d arguments given, the method takes %d", len(args), n)
		}
		in := make([]reflect.Value, n)
		for i, a := range args {
			pt := ft.In(i)
			v := reflect.ValueOf(a)
			switch {
			case a == nil:
				v = reflect.Zero(pt)
			case !v.Type().AssignableTo(pt) && v.Type().ConvertibleTo(pt):
				v = v.Convert(pt) // an untyped constant: 0 for a time.Duration
			case !v.Type().AssignableTo(pt):
				return nil, fmt.Errorf("argument %d is a %s, the method takes a %s", i, v.Type(), pt)
			}
			in[i] = v
		}
		return in, nil
	}
	in := make([]reflect.Value, n)
	for i := range n {
		pt := ft.In(i)
		switch {
		case pt == ctxType:
			in[i] = reflect.ValueOf(context.Background())
		case pt.Kind() == reflect.Func:
			in[i] = zeroFunc(pt)
		default:
			in[i] = reflect.Zero(pt)
		}
	}
	return in, nil
}

// zeroFunc is a func of type ft that returns zero values.
func zeroFunc(ft reflect.Type) reflect.Value {
	return reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value {
		out := make([]reflect.Value, ft.NumOut())
		for i := range out {
			out[i] = reflect.Zero(ft.Out(i))
		}
		return out
	})
}

// drain ranges over a returned iterator (func(yield func(...) bool)), whose
// body runs only then.
func drain(v reflect.Value) {
	t := v.Type()
	if t.Kind() != reflect.Func || v.IsNil() || t.NumIn() != 1 || t.NumOut() != 0 {
		return
	}
	yt := t.In(0)
	if yt.Kind() != reflect.Func || yt.NumOut() != 1 || yt.Out(0).Kind() != reflect.Bool {
		return
	}
	v.Call([]reflect.Value{reflect.MakeFunc(yt, func([]reflect.Value) []reflect.Value {
		return []reflect.Value{reflect.ValueOf(true)}
	})})
}

// declared lists the exported types of the package in the working
// directory (as built for this GOOS and GOARCH, without tests) that have
// exported methods.
func declared(t *testing.T) []string {
	t.Helper()
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatalf("zerotest: reading the package: %v", err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, file := range slices.Concat(pkg.GoFiles, pkg.CgoFiles) {
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("zerotest: %v", err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || !fd.Name.IsExported() {
				continue
			}
			if name := receiverName(fd.Recv.List[0].Type); ast.IsExported(name) && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	sort.Strings(names)
	return names
}

func receiverName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "" // a generic receiver: reflection cannot call it uninstantiated
}

// WantErr fails the test for each call on a receiver of one of types whose
// method returns an error that is not target: a value nobody made must be
// refused, not treated as empty (a zero world that "runs" nothing). except
// names methods ("Type.Method") whose error means something else.
func WantErr(t *testing.T, calls []Call, target error, types []string, except ...string) {
	t.Helper()
	for _, c := range calls {
		if c.Panic != nil || !c.ReturnsErr || !slices.Contains(types, c.Type) || slices.Contains(except, c.Type+"."+c.Method) {
			continue
		}
		if !errors.Is(c.Err, target) {
			t.Errorf("%v: got error %v, want one wrapping %q", c, c.Err, target)
		}
	}
}

// Refused runs each call, which hands a working receiver an argument its
// package did not make (a zero Event, a slice of a nil *Buffer), and fails
// the test listing every call that panicked or returned no error.
func Refused(t *testing.T, calls map[string]func() error) {
	t.Helper()
	var bad []string
	for _, name := range slices.Sorted(maps.Keys(calls)) {
		p, err := func() (p any, err error) {
			defer func() { p = recover() }()
			return nil, calls[name]()
		}()
		switch {
		case p != nil:
			bad = append(bad, fmt.Sprintf("%s: panic: %v", name, p))
		case err == nil:
			bad = append(bad, name+": no error")
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d calls with arguments not made by a constructor were not refused:\n\t%s",
			len(bad), len(calls), strings.Join(bad, "\n\t"))
	}
}
