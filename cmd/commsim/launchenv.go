package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/commsim/commsim/hw/cuda"
)

// A multi-process native bench is started the way people start NCCL jobs:
// by torchrun, mpirun (Open MPI) or srun (Slurm), each of which tells every
// process its rank, the world size and its local rank in variables of its
// own, as nccl-tests reads them under mpirun. Each setting is taken from
// the first of: its flag, its COMMSIM_* variable, and the launcher's
// variable, the launcher being the first of torchrun, Open MPI and Slurm
// whose world size is set. Rank 0's address comes from --addr,
// COMMSIM_ADDR, or torchrun's MASTER_ADDR and MASTER_PORT (Open MPI and
// Slurm have none; give one of the others).
//
// Launchers' variables count only for `bench --backend cuda --algo native`:
// a Slurm batch script sets SLURM_NTASKS for every command in it, and a
// simulator sweep there must not become rank 0 of a job.

// launcher is one launcher's names for a process's settings.
type launcher struct {
	name                  string
	rank, size, localRank string
}

var launchers = []launcher{
	{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
	{"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
	{"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
}

// EnvLocalRank names the variable that picks this process's GPU, as
// --gpu does.
const EnvLocalRank = "COMMSIM_LOCAL_RANK"

// torchrun's rendezvous address.
const (
	envMasterAddr = "MASTER_ADDR"
	envMasterPort = "MASTER_PORT"
)

type envLookup func(key string) (string, bool)

type envKey struct{}

// withEnv makes commands run under ctx read the environment through lookup
// alone, so that tests can run several "processes" in one.
func withEnv(ctx context.Context, lookup envLookup) context.Context {
	return context.WithValue(ctx, envKey{}, lookup)
}

// envFrom is the environment of a command's context: withEnv's, or the
// process's.
func envFrom(ctx context.Context) envLookup {
	if ctx != nil {
		if l, ok := ctx.Value(envKey{}).(envLookup); ok {
			return l
		}
	}
	return os.LookupEnv
}

// setting is one value and where it came from, for errors.
type setting struct {
	value string
	from  string // "--rank", "COMMSIM_RANK", "RANK (torchrun)"
	set   bool
	// launched says the value is a launcher's, which cuda's errors
	// would name by the COMMSIM_* variable it stands in for.
	launched bool
}

// launchSettings are a process's settings from the launcher's variables,
// below the flags and COMMSIM_* (which the caller puts over them).
type launchSettings struct {
	launcher              *launcher
	rank, size, localRank setting
	addr                  setting
}

// fromLauncher reads the first launcher whose world size is set, and
// torchrun's address. Values are checked here, so errors name the
// launcher's variables.
func fromLauncher(env envLookup) (launchSettings, error) {
	var ls launchSettings
	get := func(key, who string) (setting, error) {
		v, ok := env(key)
		if !ok || strings.TrimSpace(v) == "" {
			return setting{}, nil
		}
		v = strings.TrimSpace(v)
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			return setting{}, usagef("%s=%q (%s) is not a non-negative integer", key, v, who)
		}
		return setting{value: v, from: fmt.Sprintf("%s (%s)", key, who), set: true, launched: true}, nil
	}
	for i := range launchers {
		l := &launchers[i]
		size, err := get(l.size, l.name)
		if err != nil {
			return ls, err
		}
		if !size.set {
			continue
		}
		ls.launcher, ls.size = l, size
		if ls.rank, err = get(l.rank, l.name); err != nil {
			return ls, err
		}
		if ls.localRank, err = get(l.localRank, l.name); err != nil {
			return ls, err
		}
		break
	}
	host, hasHost := env(envMasterAddr)
	port, hasPort := env(envMasterPort)
	host, port = strings.TrimSpace(host), strings.TrimSpace(port)
	switch {
	case hasHost && host != "" && (!hasPort || port == ""):
		return ls, usagef("%s=%s is set but %s is not: rank 0's address needs both (or --addr, or %s)", envMasterAddr, host, envMasterPort, cuda.EnvAddr)
	case hasPort && port != "" && (!hasHost || host == ""):
		return ls, usagef("%s=%s is set but %s is not: rank 0's address needs both (or --addr, or %s)", envMasterPort, port, envMasterAddr, cuda.EnvAddr)
	case hasHost && host != "":
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return ls, usagef("%s=%q is not a port number (1 to 65535)", envMasterPort, port)
		}
		ls.addr = setting{value: net.JoinHostPort(host, port), from: envMasterAddr + " and " + envMasterPort + " (torchrun)", set: true, launched: true}
	}
	return ls, nil
}

// missingAddr is the error of a multi-process run without rank 0's
// address, saying where the world size came from.
func missingAddr(size setting) error {
	return usagef("a world of %s ranks (from %s) needs rank 0's address: give --addr host:port, %s, or %s and %s",
		size.value, size.from, cuda.EnvAddr, envMasterAddr, envMasterPort)
}
