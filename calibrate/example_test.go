package calibrate_test

import (
	"fmt"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// Fit a 4-GPU switch to an nccl-tests all-reduce log measured on links
// with twice the latency and half the bandwidth.
func Example() {
	const log = `# Collective test starting: all_reduce_perf
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
        1024           256     float     sum      -1    24.04    0.04    0.06      0    24.10    0.04    0.06      0
       16384          4096     float     sum      -1    24.61    0.67    1.00      0    24.70    0.66    1.00      0
      262144         65536     float     sum      -1    33.83    7.75   11.62      0    33.90    7.73   11.60      0
     4194304       1048576     float     sum      -1   181.29   23.14   34.70      0   181.50   23.11   34.66      0
`
	lg, err := calibrate.ParseLog("all_reduce.txt", []byte(log))
	if err != nil {
		panic(err)
	}
	topo, err := topology.Parse("switch:4,bw=80GB/s,lat=1us")
	if err != nil {
		panic(err)
	}
	p := calibrate.Problem{Topology: topo}
	for _, s := range lg.Samples {
		// nccl-tests' size of an all-reduce is each rank's buffer.
		plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: int(s.Bytes / 4), DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			panic(err)
		}
		p.Plans, p.MeasuredUS = append(p.Plans, plan), append(p.MeasuredUS, s.TimeUS)
	}
	fit, err := calibrate.Fit(p)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %d sizes of %s\n", lg.Format, len(lg.Samples), lg.Op)
	fmt.Printf("latency ×%.2f, bandwidth ×%.2f\n", fit.LatencyScale, fit.BandwidthScale)
	fmt.Printf("4 MiB: measured %.2f µs, fitted %.2f µs\n", p.MeasuredUS[3], fit.Seconds[3]*1e6)
	// Output:
	// nccl-tests table: 4 sizes of allreduce
	// latency ×2.00, bandwidth ×0.50
	// 4 MiB: measured 181.29 µs, fitted 181.29 µs
}
