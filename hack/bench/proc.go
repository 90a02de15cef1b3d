/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// process is a child process with its output in a log file.
type process struct {
	cmd        *exec.Cmd
	logPath    string
	metricsURL string
	pprofURL   string
	started    time.Time
	done       chan struct{}
}

// startProcess runs bin; env is added to this process's environment.
func startProcess(logPath, bin string, args, env []string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) //nolint:gosec // A log this program names.
	if err != nil {
		return nil, errors.Wrap(err, "cannot create the log file")
	}
	cmd := exec.Command(bin, args...) //nolint:gosec // The provider this program built.
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so a Ctrl-C reaches only the bench, which
	// stops it; and killed if the bench dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, errors.Wrapf(err, "cannot start %s", bin)
	}
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM, then SIGKILL after 10 s. It may be called again.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// cpuSeconds is the user and system CPU time of a process, from
// /proc/<pid>/stat, or 0 when it cannot be read.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	_, f, ok := parseStat(string(b))
	if !ok || len(f) < 13 {
		return 0
	}
	// utime and stime are fields 14 and 15 of the file.
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / clockTicks
}

// parseStat splits the text of /proc/<pid>/stat into the command name and
// the fields after it: state is f[0], the parent's pid f[1], utime f[11],
// stime f[12]. The name is in parentheses and may hold spaces and ')',
// hence the last ')'.
func parseStat(s string) (comm string, f []string, ok bool) {
	i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || j < i {
		return "", nil, false
	}
	return s[i+1 : j], strings.Fields(s[j+1:]), true
}

// childPID is the pid of this process's child whose command name is comm,
// or 0. envtest starts kube-apiserver and etcd as the bench's children.
func childPID(comm string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if c, f, ok := parseStat(string(b)); ok && c == comm && len(f) > 1 && f[1] == self {
			return pid
		}
	}
	return 0
}

// cpuMark is a reading of one process's CPU time.
type cpuMark struct {
	pid  int
	secs float64
}

// markAPIServer reads the CPU time of the kube-apiserver the bench started.
// It is the apiserver's whole CPU: kube-controller-manager, kube-scheduler,
// kwok and the bench's own polls load it too.
func markAPIServer() cpuMark {
	pid := childPID("kube-apiserver")
	if pid == 0 {
		return cpuMark{}
	}
	return cpuMark{pid: pid, secs: cpuSeconds(pid)}
}

// since is the CPU time the process spent from m0 to m, or 0 when either
// reading failed or the process is another one (envtest restarted it).
func (m cpuMark) since(m0 cpuMark) float64 {
	if m.pid == 0 || m.pid != m0.pid {
		return 0
	}
	return m.secs - m0.secs
}

// memKiB is a process's memory in KiB, from /proc/<pid>/status; 0 where it
// could not be read.
type memKiB struct {
	// peak is VmHWM, the most resident memory the process ever had.
	peak int64
	// anon and file split what is resident now: anonymous memory (the Go
	// heap, stacks) and file-backed pages (the binary's code and data).
	anon, file int64
}

// memory reads the memory figures of a process.
func memory(pid int) memKiB {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return memKiB{}
	}
	defer f.Close() //nolint:errcheck // Read only.
	return parseStatus(bufio.NewScanner(f))
}

func parseStatus(s *bufio.Scanner) memKiB {
	var m memKiB
	fields := map[string]*int64{"VmHWM:": &m.peak, "RssAnon:": &m.anon, "RssFile:": &m.file}
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), "\t")
		if p := fields[k]; ok && p != nil {
			*p, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return m
}

// selfCPU is this process's user and system CPU time, for the baselines,
// which run in it.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// loadAvg is the first three fields of /proc/loadavg: the machine is shared,
// so every figure is printed next to it.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func numCPU() int { return runtime.NumCPU() }

// A sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads the counters of a Prometheus endpoint. It parses only what
// the bench reads: name{label="value",...} number.
func scrape(ctx context.Context, url string) ([]sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer rsp.Body.Close() //nolint:errcheck // Read to the end below.
	var out []sample
	s := bufio.NewScanner(rsp.Body)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for s.Scan() {
		if m, ok := parseSample(s.Text()); ok {
			out = append(out, m)
		}
	}
	return out, s.Err()
}

func parseSample(line string) (sample, bool) {
	if line == "" || line[0] == '#' {
		return sample{}, false
	}
	m := sample{labels: map[string]string{}}
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return sample{}, false
		}
		m.name, rest = line[:i], line[j+1:]
		for _, kv := range splitLabels(line[i+1 : j]) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			if uq, err := strconv.Unquote(v); err == nil {
				v = uq
			}
			m.labels[k] = v
		}
	} else {
		f := strings.Fields(line)
		if len(f) < 2 {
			return sample{}, false
		}
		m.name, rest = f[0], strings.Join(f[1:], " ")
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return sample{}, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return sample{}, false
	}
	m.value = v
	return m, true
}

// splitLabels splits a="x",b="y" at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
