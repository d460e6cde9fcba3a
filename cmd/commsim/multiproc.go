package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/cuda"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// Multi-process bench: N copies of `commsim bench --backend cuda --algo
// native`, one per GPU and on any hosts, each holding one rank of one NCCL
// communicator. They meet through cuda.JoinNative (rank 0 serves NCCL's
// unique id over TCP), run the same sweep in lockstep, and combine their
// measurements through the communicator itself, as nccl-tests does across
// MPI ranks: a size's time is the slowest rank's (an allreduce max) and
// #wrong the sum over ranks (an allreduce sum). Rank 0 writes the report.

// Test hooks: the join and the count of local GPUs.
var (
	joinNative = cuda.JoinNative
	localGPUs  = func() (int, error) {
		devs, err := cuda.Devices()
		return len(devs), err
	}
)

// procFlags are bench's flags of a multi-process run. Each defaults to its
// COMMSIM_* variable, then to the launcher's (see launchenv.go).
type procFlags struct {
	nranks, rank, gpu int
	addr              string
	cmd               *cobra.Command // whose context holds the environment
}

func (f *procFlags) register(cmd *cobra.Command) {
	f.cmd = cmd
	fl := cmd.Flags()
	fl.IntVar(&f.nranks, "nranks", 0, "multi-process run: how many processes (ranks) run this sweep together, one GPU each; over 1 needs --backend cuda --algo native (default $"+cuda.EnvWorldSize+", else torchrun's WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_SIZE or Slurm's SLURM_NTASKS, else 1)")
	fl.IntVar(&f.rank, "rank", 0, "multi-process run: this process's rank, 0 to nranks-1; rank 0 serves the rendezvous and writes the report (default $"+cuda.EnvRank+", else RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID)")
	fl.StringVar(&f.addr, "addr", "", "multi-process run: host:port where rank 0 listens for the others, the same for every process (default $"+cuda.EnvAddr+", else $MASTER_ADDR:$MASTER_PORT)")
	fl.IntVar(&f.gpu, "gpu", 0, "multi-process run: this process's local GPU (default $"+EnvLocalRank+", else LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK or SLURM_LOCALID modulo the host's GPUs, else the rank mod the number of local GPUs)")
}

// multiProc is a checked multi-process setting.
type multiProc struct {
	rdv cuda.Rendezvous
	gpu int // -1 until resolveMulti picks the default
	// gpuFrom names where gpu came from, for errors; gpuWraps says that
	// it is a launcher's local rank, taken modulo the host's GPUs (a
	// Slurm task bound to one GPU sees it as GPU 0 whatever its local
	// rank).
	gpuFrom  string
	gpuWraps bool
}

// resolve merges the flags over COMMSIM_* over the launcher's variables.
// It returns nil for a one-process run.
func (f *procFlags) resolve(fl *pflag.FlagSet) (*multiProc, error) {
	set := fl.Changed
	switch {
	case set("nranks") && f.nranks < 1:
		return nil, usagef("--nranks %d must be at least 1", f.nranks)
	case set("rank") && f.rank < 0:
		return nil, usagef("--rank %d must not be negative", f.rank)
	case set("nranks") && set("rank") && f.rank >= f.nranks:
		return nil, usagef("--rank %d is out of range 0..%d for --nranks %d", f.rank, f.nranks-1, f.nranks)
	case set("gpu") && f.gpu < 0:
		return nil, usagef("--gpu %d must not be negative", f.gpu)
	}
	env := os.LookupEnv
	if f.cmd != nil {
		env = envFrom(f.cmd.Context())
	}
	inEnv := func(key string) bool { _, ok := env(key); return ok }
	var ls launchSettings
	if fl.Lookup("backend").Value.String() == "cuda" && fl.Lookup("algo").Value.String() == ops.Native {
		var err error
		if ls, err = fromLauncher(env); err != nil {
			return nil, err
		}
	}
	switch {
	case !set("nranks") && !inEnv(cuda.EnvWorldSize) && !ls.size.set && (set("rank") || set("addr") || set("gpu")):
		return nil, usagef("--rank, --addr and --gpu are for multi-process runs: add --nranks N (or set %s)", cuda.EnvWorldSize)
	case set("nranks") && f.nranks > 1 && !set("rank") && !inEnv(cuda.EnvRank) && !ls.rank.set:
		return nil, usagef("--nranks %d needs this process's --rank (or %s)", f.nranks, cuda.EnvRank)
	case set("nranks") && f.nranks > 1 && !set("addr") && !inEnv(cuda.EnvAddr) && !ls.addr.set:
		return nil, usagef("--nranks %d needs --addr, host:port of rank 0 (or %s, or %s and %s)", f.nranks, cuda.EnvAddr, envMasterAddr, envMasterPort)
	}
	// pick is a setting's value: its flag, its COMMSIM_* variable, or
	// the launcher's.
	pick := func(flag, flagValue, key string, launched setting) setting {
		if set(flag) {
			return setting{value: flagValue, from: "--" + flag, set: true}
		}
		if v, ok := env(key); ok {
			return setting{value: v, from: key, set: true}
		}
		return launched
	}
	size := pick("nranks", strconv.Itoa(f.nranks), cuda.EnvWorldSize, ls.size)
	rank := pick("rank", strconv.Itoa(f.rank), cuda.EnvRank, ls.rank)
	addr := pick("addr", f.addr, cuda.EnvAddr, ls.addr)
	if err := checkLaunched(size, rank, addr); err != nil {
		return nil, err
	}
	lookup := func(key string) (string, bool) {
		switch key {
		case cuda.EnvWorldSize:
			return size.value, size.set
		case cuda.EnvRank:
			return rank.value, rank.set
		case cuda.EnvAddr:
			return addr.value, addr.set
		}
		return env(key)
	}
	rdv, err := cuda.RendezvousFromLookup(lookup)
	if err != nil {
		return nil, usagef("multi-process settings (--nranks, --rank and --addr over %s, %s and %s): %v", cuda.EnvWorldSize, cuda.EnvRank, cuda.EnvAddr, err)
	}
	if rdv.Size == 1 {
		if set("rank") || set("addr") || set("gpu") {
			return nil, usagef("--rank, --addr and --gpu are for multi-process runs: add --nranks N (or set %s)", cuda.EnvWorldSize)
		}
		return nil, nil
	}
	if _, port, err := net.SplitHostPort(rdv.Addr); err == nil && port == "0" {
		// The library lets rank 0 listen on a port of the system's
		// choosing and hand it out; processes launched apart cannot
		// learn it.
		return nil, usagef("rank 0's address %s (from %s): port 0 is no port the other processes can dial; give the one rank 0 listens on", rdv.Addr, addr.from)
	}
	m := &multiProc{rdv: rdv, gpu: -1}
	switch {
	case set("gpu"):
		m.gpu, m.gpuFrom = f.gpu, fmt.Sprintf("--gpu %d", f.gpu)
	case inEnv(EnvLocalRank):
		v, _ := env(EnvLocalRank)
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return nil, usagef("%s=%q is not a non-negative integer", EnvLocalRank, v)
		}
		m.gpu, m.gpuFrom = n, fmt.Sprintf("%s=%d", EnvLocalRank, n)
	case ls.localRank.set:
		m.gpu, _ = strconv.Atoi(ls.localRank.value)
		m.gpuFrom, m.gpuWraps = ls.localRank.from, true
	}
	return m, nil
}

// checkLaunched checks what the launcher's variables supplied, so that
// errors name them rather than the COMMSIM_* variables they stand in for.
func checkLaunched(size, rank, addr setting) error {
	if !size.launched && !rank.launched {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(size.value))
	if !size.set || err != nil || n <= 1 {
		return nil // a one-process run, or an error RendezvousFromLookup names
	}
	if !rank.set {
		return usagef("a world of %d ranks (from %s) needs this process's rank: --rank, %s, or the launcher's", n, size.from, cuda.EnvRank)
	}
	if r, err := strconv.Atoi(strings.TrimSpace(rank.value)); err == nil && r >= n {
		return usagef("rank %d (from %s) is out of range 0..%d for a world of %d ranks (from %s)", r, rank.from, n-1, n, size.from)
	}
	if !addr.set {
		return missingAddr(size)
	}
	return nil
}

// check refuses the bench flags a multi-process run cannot honour.
func (m *multiProc) check(f *benchFlags) error {
	if f.backend != "cuda" || f.algo != ops.Native {
		return usagef("a multi-process run (%d ranks, from --nranks or %s) needs --backend cuda --algo native: it runs NCCL's collectives; got --backend %s --algo %s",
			m.rdv.Size, cuda.EnvWorldSize, f.backend, f.algo)
	}
	if f.ranks != 0 || f.placement != "" || f.trace != "" || f.timingOnly {
		return usagef("--ranks, --placement, --trace and --timing-only do not apply to a multi-process run: each process holds one rank on one GPU")
	}
	return nil
}

// resolveMulti is backendFlags.resolve for a multi-process run: this
// process's GPU, and the communicator's ranks for the cost model.
func (f *backendFlags) resolveMulti(topoSet bool, topoSpec string) (*backendPlan, *topology.Topology, error) {
	m := f.multi
	n, err := localGPUs()
	if err != nil {
		return nil, nil, err
	}
	if n == 0 {
		return nil, nil, errors.New("cuda: no GPU on this host")
	}
	switch {
	case m.gpu < 0:
		m.gpu = m.rdv.Rank % n
	case m.gpu >= n && m.gpuWraps:
		m.gpu %= n
	case m.gpu >= n:
		return nil, nil, usagef("%s: this host has %d GPU(s), 0..%d", m.gpuFrom, n, n-1)
	}
	bp := &backendPlan{name: "cuda", ranks: m.rdv.Size, gpus: []int{m.gpu}, multi: m}
	topo, err := f.costModel(bp, topoSet, topoSpec)
	if err != nil {
		return nil, nil, err
	}
	return bp, topo, nil
}

// rankError is a multi-process run's failure on one rank, on one line.
type rankError struct {
	rank, size int
	err        error
}

func (e rankError) Error() string {
	return fmt.Sprintf("rank %d of %d: %s", e.rank, e.size, strings.ReplaceAll(e.err.Error(), "\n", "; "))
}

func (e rankError) Unwrap() error { return e.err }

// runMulti runs this process's rank of the sweep. Rank 0 writes the
// report; the other ranks write nothing unless they fail.
//
// A sweep measured whole whose communicator then fails to close is still
// reported, in full, before the close's error: the sizes were measured.
func (s *sweep) runMulti(stdout, stderr io.Writer) error {
	rdv := s.backend.multi.rdv
	rows, closeErr, err := s.measureMulti(stderr)
	if err != nil {
		err = errors.Join(err, closeErr)
		if rdv.Rank == 0 {
			err = s.keepPartial(stderr, rows, err)
		}
		return rankError{rdv.Rank, rdv.Size, err}
	}
	switch wrong, _ := totalWrong(rows); {
	case rdv.Rank == 0:
		err = s.report(stdout, stderr, rows)
	case wrong > 0:
		err = fmt.Errorf("--check found %d wrong elements over all ranks (rank 0 reports them)", wrong)
	}
	if closeErr != nil {
		err = errors.Join(err, fmt.Errorf("every size was measured, but closing the communicator failed: %w", closeErr))
	}
	if err == nil || rdv.Rank == 0 && closeErr == nil {
		return err // rank 0's report says its own failures
	}
	return rankError{rdv.Rank, rdv.Size, err}
}

// rankRun is one process's share of a multi-process sweep.
type rankRun struct {
	s          *sweep
	comm       hw.NativeComm
	dev        hw.Device
	stream     hw.Stream
	rank, size int
	times      hw.Slice // f64 × 2: out-of-place and in-place seconds
	wrongs     hw.Slice // i64 × 2: their wrong elements
}

// measureMulti joins the communicator, checks that every rank runs the same
// sweep, and measures each size on this rank, combined over all ranks. On
// an error it returns the rows measured before. Closing the communicator
// at the end has an error of its own.
func (s *sweep) measureMulti(stderr io.Writer) (rows []row, closeErr, err error) {
	m := s.backend.multi
	w, comm, closeFn, err := joinNative(context.Background(), m.rdv, m.gpu)
	if err != nil {
		return nil, nil, err
	}
	defer func() { closeErr = closeFn() }()
	dev := w.Devices()[0]
	rr := &rankRun{s: s, comm: comm, dev: dev, rank: m.rdv.Rank, size: m.rdv.Size}
	if rr.stream, err = dev.NewStream(); err != nil {
		return nil, nil, err
	}
	for _, b := range []struct {
		s  *hw.Slice
		dt hw.DType
	}{{&rr.times, hw.F64}, {&rr.wrongs, hw.I64}} {
		buf, err := dev.Alloc(b.dt, 2)
		if err != nil {
			return nil, nil, err
		}
		*b.s = hw.Whole(buf)
	}
	if err := rr.agree(); err != nil {
		return nil, nil, err
	}
	var bar *progress
	if rr.rank == 0 {
		bar = newProgress(stderr, len(s.sizes))
	}
	defer bar.stop()
	for _, bytes := range s.sizes {
		spec, moved := s.spec(bytes)
		plan, err := s.plan(spec)
		if err != nil {
			return rows, nil, err
		}
		var secs [2]float64
		var wrong [2]int64
		for i, inPlace := range []bool{false, true} {
			if secs[i], wrong[i], err = rr.runOnce(plan, inPlace); err != nil {
				return rows, nil, fmt.Errorf("%v (%d bytes, %s): %w", s.op, moved, map[bool]string{false: "out of place", true: "in place"}[inPlace], err)
			}
		}
		if err := rr.combine(&secs, &wrong); err != nil {
			return rows, nil, err
		}
		r := s.newRow(plan, moved)
		r.outOfPlace, r.inPlace = timed(secs[0], moved, s.op, rr.size), timed(secs[1], moved, s.op, rr.size)
		if s.check {
			r.outOfPlace.wrong, r.inPlace.wrong = int(wrong[0]), int(wrong[1])
		}
		rows = append(rows, r)
		bar.step()
	}
	bar.done()
	return rows, nil, nil
}

// runOnce runs one size on this rank and checks its output: this rank's
// time and wrong elements.
func (rr *rankRun) runOnce(plan *ops.Plan, inPlace bool) (secs float64, wrong int64, err error) {
	s := rr.s
	// As in the one-process sweep, values matter only for --check. The
	// reference needs every rank's input; they are deterministic, so each
	// rank makes them all and the runner writes its own.
	c := verify.Case{Spec: plan.Spec}
	if s.check {
		if c.Inputs, err = verify.PatternInputs(plan.Spec); err != nil {
			return 0, 0, err
		}
	}
	rank := verify.Rank{Index: rr.rank, Device: rr.dev, Launch: func(plan *ops.Plan, in, out hw.Slice, runs int) (float64, error) {
		return ops.RunNativeRankBackToBack(rr.comm, rr.stream, plan, rr.rank, in, out, runs)
	}}
	run, err := s.runner.RunRank(rank, plan, c.Inputs, inPlace)
	if err != nil || !s.check {
		return run.Seconds, 0, err
	}
	n, _, err := verify.CountWrongRank(c, rr.rank, run.Outputs[rr.rank])
	return run.Seconds, int64(n), err
}

// combine replaces this rank's times by the slowest rank's and, with
// --check, its wrong counts by every rank's sum: allreduces over the
// communicator.
func (rr *rankRun) combine(secs *[2]float64, wrong *[2]int64) error {
	if err := rr.allReduce(rr.times, hw.Max, hw.Encode(secs[:]), func(b []byte) error {
		v, err := hw.Decode[float64](b)
		copy(secs[:], v)
		return err
	}); err != nil {
		return fmt.Errorf("combining the ranks' times: %w", err)
	}
	if !rr.s.check {
		return nil
	}
	if err := rr.allReduce(rr.wrongs, hw.Sum, hw.Encode(wrong[:]), func(b []byte) error {
		v, err := hw.Decode[int64](b)
		copy(wrong[:], v)
		return err
	}); err != nil {
		return fmt.Errorf("adding up the ranks' wrong elements: %w", err)
	}
	return nil
}

// agree checks that every rank runs the same sweep: ranks that disagree on
// the op, sizes or dtype would hand NCCL mismatched calls, which hang or
// corrupt memory. It allreduces (h, −h) with max for a hash h of the sweep:
// every rank has the same h when the result is (h, −h).
func (rr *rankRun) agree() error {
	s := rr.s
	f := fnv.New64a()
	fmt.Fprintf(f, "%v|%s|%v|%v|%v|%d|%v", s.op, s.algo, s.dtype, s.redop, s.sizes, s.root, s.check)
	h := int64(f.Sum64() >> 1)
	var got [2]int64
	err := rr.allReduce(rr.wrongs, hw.Max, hw.Encode([]int64{h, -h}), func(b []byte) error {
		v, err := hw.Decode[int64](b)
		copy(got[:], v)
		return err
	})
	if err != nil {
		return fmt.Errorf("checking that the ranks agree on the sweep: %w", err)
	}
	if got[0] != h || got[1] != -h {
		return fmt.Errorf("the ranks run different sweeps: every process needs the same --op, --dtype, --redop, sizes (-b, -e, -f), --root and --check")
	}
	return nil
}

// allReduce reduces vals (two elements of buf's dtype) over every rank in
// place in buf, and hands the result to read.
func (rr *rankRun) allReduce(buf hw.Slice, op hw.ReduceOp, vals []byte, read func([]byte) error) error {
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: ops.Native, Ranks: rr.size, Count: buf.Len, DType: buf.DType(), Redop: op})
	if err != nil {
		return err
	}
	if err := buf.Buf.Write(vals); err != nil {
		return err
	}
	if _, err := ops.RunNativeRank(rr.comm, rr.stream, plan, rr.rank, buf, buf); err != nil {
		return err
	}
	got := make([]byte, len(vals))
	if err := buf.Buf.Read(got); err != nil {
		return err
	}
	return read(got)
}
