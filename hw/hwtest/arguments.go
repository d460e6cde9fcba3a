package hwtest

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/commsim/commsim/hw"
)

// BadArgumentsAreRefused checks that every enqueueing method refuses bad
// arguments at once with the sentinel hw/errors.go documents, naming the
// device, and enqueues nothing: nil buffers, slices outside their buffer,
// buffers of another device or world, freed buffers, mixed dtypes and
// lengths, Avg and invalid ops to Reduce, divisors below 1, unknown or nil
// peers, nil and foreign events; likewise Alloc with a negative length or
// an invalid dtype, World.Send and Recv with a rank outside the world, and
// ElapsedSince with a nil or foreign start.
func BadArgumentsAreRefused(t *testing.T, b Backend) {
	defer noPanic(t)
	w := openWorld(t, b.NewWorld, 2)
	other := openWorld(t, b.NewWorld, 2)
	d := w.Devices()
	// Worlds may name their devices alike; the other world's rank 1 keeps
	// d[0]'s name out of the errors unless they name the calling device.
	od := other.Devices()[1]
	s := newStream(t, d[0])
	f := filled(t, d[0], 3, 8) // i32
	f32 := alloc(t, d[0], hw.F32, 8)
	short := alloc(t, d[0], hw.I32, 4)
	remote := alloc(t, d[1], hw.I32, 8)
	foreign := alloc(t, od, hw.I32, 8)
	freed := alloc(t, d[0], hw.I32, 8)
	must(t, freed.Free())
	ev, foreignEv := newEvent(t, d[0]), newEvent(t, od)
	whole := hw.Whole
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"copy into a nil buffer", s.Copy(hw.Slice{}, whole(f)), hw.ErrBadArgument},
		{"copy from a nil buffer", s.Copy(whole(f), hw.Slice{Len: 8}), hw.ErrBadArgument},
		{"copy past the end", s.Copy(hw.Slice{Buf: f, Off: 6, Len: 4}, hw.Slice{Buf: short, Len: 4}), hw.ErrBadArgument},
		{"copy at a negative offset", s.Copy(hw.Slice{Buf: f, Off: -1, Len: 4}, whole(short)), hw.ErrBadArgument},
		{"copy a negative length", s.Copy(hw.Slice{Buf: f, Len: -1}, hw.Slice{Buf: short, Len: -1}), hw.ErrBadArgument},
		{"copy from another device", s.Copy(whole(f), whole(remote)), hw.ErrBadArgument},
		{"copy into another world", s.Copy(whole(foreign), whole(f)), hw.ErrBadArgument},
		{"copy from a freed buffer", s.Copy(whole(f), whole(freed)), hw.ErrFreed},
		{"copy between dtypes", s.Copy(whole(f), whole(f32)), hw.ErrDTypeMismatch},
		{"copy between lengths", s.Copy(whole(f), whole(short)), hw.ErrSizeMismatch},
		{"reduce with Avg", s.Reduce(hw.Avg, whole(f), whole(f)), hw.ErrBadArgument},
		{"reduce with op 0", s.Reduce(0, whole(f), whole(f)), hw.ErrBadArgument},
		{"reduce with op 99", s.Reduce(99, whole(f), whole(f)), hw.ErrBadArgument},
		{"reduce between dtypes", s.Reduce(hw.Sum, whole(f), whole(f32)), hw.ErrDTypeMismatch},
		{"reduce between lengths", s.Reduce(hw.Sum, whole(f), whole(short)), hw.ErrSizeMismatch},
		{"reduce from another device", s.Reduce(hw.Sum, whole(f), whole(remote)), hw.ErrBadArgument},
		{"reduce into a freed buffer", s.Reduce(hw.Sum, whole(freed), whole(f)), hw.ErrFreed},
		{"divide by 0", s.Divide(whole(f), 0), hw.ErrBadArgument},
		{"divide by -1", s.Divide(whole(f), -1), hw.ErrBadArgument},
		{"divide past the end", s.Divide(hw.Slice{Buf: f, Off: 4, Len: 5}, 2), hw.ErrBadArgument},
		{"divide a freed buffer", s.Divide(whole(freed), 2), hw.ErrFreed},
		{"send to another world's device", s.Send(whole(f), od, 1), hw.ErrUnknownPeer},
		{"send to a nil device", s.Send(whole(f), nil, 1), hw.ErrUnknownPeer},
		{"send another device's buffer", s.Send(whole(remote), d[1], 1), hw.ErrBadArgument},
		{"send a nil buffer", s.Send(hw.Slice{}, d[1], 1), hw.ErrBadArgument},
		{"send a freed buffer", s.Send(whole(freed), d[1], 1), hw.ErrFreed},
		{"recv from another world's device", s.Recv(whole(f), od, 1), hw.ErrUnknownPeer},
		{"recv from a nil device", s.Recv(whole(f), nil, 1), hw.ErrUnknownPeer},
		{"recv into another device's buffer", s.Recv(whole(remote), d[1], 1), hw.ErrBadArgument},
		{"recv past the end", s.Recv(hw.Slice{Buf: f, Len: 9}, d[1], 1), hw.ErrBadArgument},
		{"recv into a freed buffer", s.Recv(whole(freed), d[1], 1), hw.ErrFreed},
		{"record a nil event", s.Record(nil), hw.ErrBadArgument},
		{"record another world's event", s.Record(foreignEv), hw.ErrBadArgument},
		{"wait on a nil event", s.Wait(nil), hw.ErrBadArgument},
		{"wait on another world's event", s.Wait(foreignEv), hw.ErrBadArgument},
	}
	for _, c := range cases {
		wantErr(t, c.name, c.err, c.want, d[0].Name())
	}
	for _, n := range []struct {
		name string
		dt   hw.DType
		n    int
	}{{"alloc a negative length", hw.I32, -1}, {"alloc dtype 0", 0, 1}, {"alloc dtype 99", 99, 1},
		{"alloc past 2^63 bytes", hw.F64, 1 << 61}} {
		_, err := d[0].Alloc(n.dt, n.n)
		wantErr(t, n.name, err, hw.ErrBadArgument, d[0].Name())
	}
	// hw.World's own checks, and ElapsedSince, whose errors need not name
	// a device.
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"world send to rank 2 of 2", w.Send(s, 2, whole(f), 1), hw.ErrUnknownPeer},
		{"world recv from rank -1", w.Recv(s, -1, whole(f), 1), hw.ErrUnknownPeer},
		{"elapsed since a nil event", elapsedErr(ev, nil), hw.ErrBadArgument},
		{"elapsed since another world's event", elapsedErr(ev, foreignEv), hw.ErrBadArgument},
	} {
		wantErr(t, c.name, c.err, c.want)
	}

	// Nothing was enqueued: the stream is healthy and f is untouched.
	must(t, s.Record(ev))
	if err := synchronize(t, s); err != nil {
		t.Errorf("Synchronize after the refused calls: %v", err)
	}
	wantAll(t, "the buffer the refused calls named", f, 3)
}

func elapsedErr(e, start hw.Event) error {
	_, err := e.ElapsedSince(start)
	return err
}

// UnmadeArgumentsAreRefused checks that values of the backend's own types
// that its constructors did not make, a pointer to a zero Buffer, Device,
// Event or Stream and a nil one of each, are refused as arguments like
// any other bad argument, and never make a call panic: as a slice's
// buffer, a peer, an event, and the stream of World.Send and Recv. Such a
// value has no device, world or lock behind it, so a check that reaches
// through it crashes instead of refusing.
func UnmadeArgumentsAreRefused(t *testing.T, b Backend) {
	w := openWorld(t, b.NewWorld, 2)
	d := w.Devices()
	s := newStream(t, d[0])
	f := filled(t, d[0], 3, 8) // i32
	ev := newEvent(t, d[0])
	whole := hw.Whole
	zb, nb := unmade(t, f)
	zd, nd := unmade(t, d[0])
	ze, ne := unmade(t, ev)
	zs, ns := unmade(t, s)
	for _, u := range []struct {
		what string
		buf  hw.Buffer
		dev  hw.Device
		ev   hw.Event
		s    hw.Stream
	}{{"zero", zb, zd, ze, zs}, {"nil", nb, nd, ne, ns}} {
		sl := hw.Slice{Buf: u.buf}
		for _, c := range []struct {
			name string
			call func() error
			want error
		}{
			{"copy into a slice of a %s buffer", func() error { return s.Copy(sl, whole(f)) }, hw.ErrBadArgument},
			{"copy from a slice of a %s buffer", func() error { return s.Copy(whole(f), sl) }, hw.ErrBadArgument},
			{"reduce from a slice of a %s buffer", func() error { return s.Reduce(hw.Sum, whole(f), sl) }, hw.ErrBadArgument},
			{"divide a slice of a %s buffer", func() error { return s.Divide(sl, 2) }, hw.ErrBadArgument},
			{"send a slice of a %s buffer", func() error { return s.Send(sl, d[1], 1) }, hw.ErrBadArgument},
			{"recv into a slice of a %s buffer", func() error { return s.Recv(sl, d[1], 1) }, hw.ErrBadArgument},
			{"describe and check a slice of a %s buffer", func() error { _ = sl.String(); return sl.CheckOn(d[0]) }, hw.ErrBadArgument},
			{"send to a %s device", func() error { return s.Send(whole(f), u.dev, 1) }, hw.ErrUnknownPeer},
			{"recv from a %s device", func() error { return s.Recv(whole(f), u.dev, 1) }, hw.ErrUnknownPeer},
			{"record a %s event", func() error { return s.Record(u.ev) }, hw.ErrBadArgument},
			{"wait on a %s event", func() error { return s.Wait(u.ev) }, hw.ErrBadArgument},
			{"elapsed since a %s event", func() error { return elapsedErr(ev, u.ev) }, hw.ErrBadArgument},
			{"world send on a %s stream", func() error { return w.Send(u.s, 1, whole(f), 1) }, hw.ErrUnknownPeer},
			{"world recv on a %s stream", func() error { return w.Recv(u.s, 1, whole(f), 1) }, hw.ErrUnknownPeer},
		} {
			wantErr(t, fmt.Sprintf(c.name, u.what), recovered(c.call), c.want)
		}
	}

	// Nothing was enqueued: the stream is healthy and f is untouched.
	must(t, s.Record(ev))
	if err := synchronize(t, s); err != nil {
		t.Errorf("Synchronize after the refused calls: %v", err)
	}
	wantAll(t, "the buffer the refused calls named", f, 3)
}

// unmade returns, for v of the backend's pointer type *T, a pointer to a
// zero T and a nil *T: what a caller has who declared one instead of
// asking the backend for it.
func unmade[I any](t *testing.T, v I) (zero, nilPtr I) {
	t.Helper()
	typ := reflect.TypeOf(v)
	if typ == nil || typ.Kind() != reflect.Pointer {
		t.Fatalf("hwtest: %T is not a pointer type; this check needs one", v)
	}
	return reflect.New(typ.Elem()).Interface().(I), reflect.Zero(typ).Interface().(I)
}

// recovered is f's error, or an error saying that f panicked.
func recovered(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}
