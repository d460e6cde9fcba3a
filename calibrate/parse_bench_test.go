package calibrate

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParseLogNCCLLines parses a log of 20,000 NCCL INFO lines
// (NCCL_DEBUG=INFO's channel lines, as a large job prints them) and a
// 30-size table: the log's bytes per second.
func BenchmarkParseLogNCCLLines(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("# Collective test starting: all_reduce_perf\n#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n")
	for i := range 20000 {
		fmt.Fprintf(&sb, "gpu01:1234:1234 [0] NCCL INFO Channel %02d/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n", i%32)
	}
	for i, size := 0, 8; i < 30; i, size = i+1, size*2 {
		fmt.Fprintf(&sb, "  %d  %d  float  sum  -1  %d.00  0  0  0  %d.00  0  0  0\n", size, size/4, 10+i, 10+i)
	}
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseLog("log", data); err != nil {
			b.Fatal(err)
		}
	}
}
