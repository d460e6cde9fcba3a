package calibrate

import (
	"reflect"
	"strings"
	"testing"

	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
)

// A log carries what NCCL said of itself: its version (NCCL's version
// line, or nccl-tests' nccl-library code) and, with NCCL_DEBUG=INFO, the
// variables it read; NCCLOptions keeps those commsim follows and names
// the others.
func TestParseLogReadsNCCLsOwnLines(t *testing.T) {
	info := "node1:4242:4242 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n" +
		"node1:4242:4242 [0] NCCL INFO NCCL_IB_HCA set to mlx5\n" +
		"node1:4242:4242 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n" +
		"node1:4243:4243 [1] NCCL INFO NCCL_PROTO set by environment to Simple\n" +
		"node1:4242:4242 [0] NCCL INFO NCCL_BUFFSIZE set by environment to 8388608.\n" +
		"node1:4242:4242 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
	lg, err := ParseLog("info", []byte(info+plainLog))
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := map[string]string{"NCCL_PROTO": "Simple", "NCCL_BUFFSIZE": "8388608", "NCCL_SOCKET_IFNAME": "eth0"}
	if lg.NCCLVersion != "2.21.5" || !reflect.DeepEqual(lg.NCCLEnv, wantEnv) {
		t.Errorf("version %q, env %v; want 2.21.5, %v", lg.NCCLVersion, lg.NCCLEnv, wantEnv)
	}
	run, stated, err := lg.NCCLOptions()
	want := nccl.Options{Version: nccl.V2_21, Protos: []ops.Protocol{ops.ProtoSimple}, BuffSize: 8 << 20}
	followed := map[string]string{"NCCL_PROTO": "Simple", "NCCL_BUFFSIZE": "8388608"}
	if err != nil || !stated || !reflect.DeepEqual(run.Options, want) || !reflect.DeepEqual(run.Env, followed) || !reflect.DeepEqual(run.Ignored, []string{"NCCL_SOCKET_IFNAME=eth0"}) {
		t.Errorf("NCCLOptions: %+v, %v, %v; want %+v from %v, the socket ignored", run, stated, err, want, followed)
	}

	header := "# nccl-tests version 2.13.9 nccl-headers=22703 nccl-library=22703\n"
	if lg, err := ParseLog("header", []byte(header+plainLog)); err != nil || lg.NCCLVersion != "2.27.3" {
		t.Errorf("nccl-library=22703: %+v, %v; want 2.27.3", lg, err)
	}
	if lg, err := ParseLog("old", []byte("# nccl-tests version 2.0.0 nccl-headers=2708 nccl-library=2708\n"+plainLog)); err != nil || lg.NCCLVersion != "2.7.8" {
		t.Errorf("nccl-library=2708: %+v, %v; want 2.7.8", lg, err)
	}
	plain, err := ParseLog("plain", []byte(plainLog))
	if _, stated, _ := plain.NCCLOptions(); err != nil || stated {
		t.Errorf("a log that says nothing of NCCL: %+v, %v", plain, err)
	}
	for text, why := range map[string]string{
		"NCCL version 2.16.5+cuda12.0\n":                           "older than 2.18",
		"x [0] NCCL INFO NCCL_PROTO set by environment to LL256\n": `unknown protocol "LL256"`,
	} {
		lg, err := ParseLog("bad", []byte(text+plainLog))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := lg.NCCLOptions(); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v; want an error saying %q", text, err, why)
		}
	}
}
