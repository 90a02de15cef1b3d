/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const (
	errFmtStartProc = "cannot start %s"
	errFmtLogFile   = "cannot create the log file of %s"
	errWatchdog     = "cannot start the watchdog that stops every process if this one dies"

	// stopGrace is how long a process has to exit after SIGTERM.
	stopGrace = 10 * time.Second
)

// watchdogScript reads PIDs, one a line, until its stdin closes: that is,
// until the process that started it exits, however it exits (even SIGKILL or
// a test timeout, where no deferred cleanup runs). It then kills every PID it
// was told about and runs every "sh COMMAND" line it was given (stopping
// what is not a child, such as the libvirt sandbox). A line "done" means
// everything was stopped in order and there is nothing left to do.
const watchdogScript = `pids=""
cmds=""
while IFS= read -r l; do
  case "$l" in
    done) exit 0 ;;
    "sh "*) cmds="$cmds
${l#sh }" ;;
    *) pids="$pids $l" ;;
  esac
done
[ -n "$pids" ] && kill -KILL $pids 2>/dev/null
printf '%s\n' "$cmds" | while IFS= read -r c; do
  [ -n "$c" ] && sh -c "$c" </dev/null >/dev/null 2>&1
done
exit 0`

// A Process is a child process with its output in a log file.
type Process struct {
	// Name names the process in messages.
	Name string
	// Log is the file that holds its stdout and stderr.
	Log string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Err is why the process exited, once Exited is closed.
func (p *Process) Err() error { return p.err }

// PID is the process's ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// supervisor starts processes and stops all of them, newest first.
type supervisor struct {
	logDir string

	mu      sync.Mutex
	procs   []*Process
	foreign []int
	wd      *exec.Cmd
	wdIn    io.WriteCloser
}

func newSupervisor(logDir string) (*supervisor, error) {
	s := &supervisor{logDir: logDir}
	wd := exec.Command("/bin/sh", "-c", watchdogScript)
	// Its own process group: a Ctrl-C on the terminal must not kill the
	// watchdog before the processes it guards.
	wd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := wd.StdinPipe()
	if err != nil {
		return nil, errors.Wrap(err, errWatchdog)
	}
	if err := wd.Start(); err != nil {
		return nil, errors.Wrap(err, errWatchdog)
	}
	s.wd, s.wdIn = wd, in
	return s, nil
}

// guard tells the watchdog about a PID.
func (s *supervisor) guard(pid int) {
	_, _ = fmt.Fprintln(s.wdIn, pid)
}

// onAbort has the watchdog run a shell command if this process dies
// without stopping everything in order.
func (s *supervisor) onAbort(cmd string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = fmt.Fprintln(s.wdIn, "sh "+cmd)
}

// removeOnAbort has the watchdog remove a folder if this process dies
// without stopping everything in order.
func (s *supervisor) removeOnAbort(dir string) {
	if dir != "" {
		s.onAbort("rm -rf " + shellQuote(dir))
	}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// adopt guards a process this package did not start itself (envtest's etcd
// and kube-apiserver), so it cannot outlive this one either.
func (s *supervisor) adopt(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foreign = append(s.foreign, pid)
	s.guard(pid)
}

// start runs bin with args; env is added to this process's environment.
func (s *supervisor) start(name, bin string, args, env []string) (*Process, error) {
	log := filepath.Join(s.logDir, name+".log")
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, errors.Wrapf(err, errFmtLogFile, name)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so that a Ctrl-C reaches only the program that
	// stops everything in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	_, _ = fmt.Fprintf(f, "### %s %s %s\n", time.Now().Format(time.RFC3339), bin, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, errors.Wrapf(err, errFmtStartProc, name)
	}
	p := &Process{Name: name, Log: log, cmd: cmd, done: make(chan struct{})}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.guard(cmd.Process.Pid)
	s.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// Stop stops the process: SIGTERM, then SIGKILL after the grace period.
func (p *Process) Stop() { p.stop() }

// stop stops one process: SIGTERM, then SIGKILL after the grace period.
func (p *Process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// stopAll stops every process it started, newest first, then tells the
// watchdog there is nothing left to do.
func (s *supervisor) stopAll() {
	s.mu.Lock()
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop()
	}
}

// close ends the watchdog. Foreign processes must be stopped by then.
func (s *supervisor) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pid := range s.foreign {
		// Whatever envtest left behind; normally they are gone already.
		if syscall.Kill(pid, 0) == nil && isChild(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if s.wdIn != nil {
		_, _ = fmt.Fprintln(s.wdIn, "done")
		_ = s.wdIn.Close()
		_ = s.wd.Wait()
		s.wdIn = nil
	}
}

// children returns the PIDs of this process's children whose program is
// one of names.
func children(names ...string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !isChild(pid) {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue
		}
		for _, n := range names {
			if filepath.Base(strings.TrimSuffix(exe, " (deleted)")) == n {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// isChild reports whether pid is a child of this process.
func isChild(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The command name is in parentheses and may hold spaces: the fields
	// after the last ')' are state, ppid, ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(s[i+1:])
	return len(f) > 1 && f[1] == strconv.Itoa(os.Getpid())
}

// cmdlineFlag returns the value of --name=value in a process's command line.
func cmdlineFlag(pid int, name string) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return ""
	}
	prefix := "--" + name + "="
	for _, a := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(a, prefix); ok {
			return v
		}
	}
	return ""
}
