// Command gcp-fake serves the fake Compute Engine API of internal/gcpfake
// for a local dev environment or an end-to-end run. It prints the URL it
// serves on, one line on stdout, and runs until SIGINT or SIGTERM. Faults
// are injected over HTTP under /_fake/ (see internal/gcpfake/admin.go).
//
// A GCPProxy is Ready once its VM's guest reports that squid serves. With
// --guest-libvirt-uri every RUNNING instance gets a real guest: a VM of the
// guest image on that (private) libvirtd, which runs the instance's
// user-data and startup-script and reports through the fake's metadata
// server (see internal/gcpfake/guestvm). Without it the fake runs no VM,
// and --simulate-guests (the default) reports for every proxy VM's guest
// that squid serves.
//
//	gcp-fake --address 127.0.0.1:8089 --project my-project
//	curl -X POST $URL/_fake/faults/storm -d '{"for":"30s"}'
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/backend/gcp"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake/guestvm"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake/proxyguest"
)

const (
	errFlags = "cannot parse flags"
	errStart = "cannot start the GCE fake"
	errPrint = "cannot print the URL"
	errGuest = "cannot run real guests"
	errBoth  = "--simulate-guests and --guest-libvirt-uri exclude each other"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gcp-fake:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("gcp-fake", flag.ContinueOnError)
	address := fs.String("address", "127.0.0.1:0", "listen address (host:port; port 0 picks a free one)")
	projects := fs.String("project", "", "comma-separated projects that exist; empty means every project exists")
	zones := fs.String("zones", strings.Join(gcpfake.DefaultZones(), ","), "comma-separated zones the fake knows")
	polls := fs.Int("operation-polls", 1, "observations an operation needs before it is DONE")
	provisioning := fs.Int("provisioning-polls", 1, "observations a new instance spends in PROVISIONING")
	staging := fs.Int("staging-polls", 1, "observations a new instance spends in STAGING")
	requireAuth := fs.Bool("require-auth", false, "require a bearer token from POST /token (keys from POST /_fake/keys)")
	strict := fs.Bool("strict-address-delete", false, "refuse to delete IN_USE addresses")
	guests := fs.Bool("simulate-guests", true, "stand in for every proxy VM's guest: report (guest attribute "+gcp.GuestAttributePath+") that squid serves the configuration in its metadata; off, tests report through /_fake/ or a real guest")
	var vm guestvm.Config
	fs.StringVar(&vm.URI, "guest-libvirt-uri", "", "run a real guest for every RUNNING instance on this libvirtd (qemu+unix:///system?socket=...); turns --simulate-guests off")
	fs.StringVar(&vm.NetNS, "guest-netns", "", "with --guest-libvirt-uri: the network namespace (path) of the guests' libvirt network")
	fs.StringVar(&vm.Network, "guest-network", "default", "with --guest-libvirt-uri: the libvirt NAT network of the guests")
	fs.StringVar(&vm.Dir, "guest-dir", "", "with --guest-libvirt-uri: the folder for the guests' disks, seeds and console logs (QEMU reads it)")
	fs.StringVar(&vm.Image, "guest-image", "", "with --guest-libvirt-uri: the guest image (hack/guest-image.sh path)")
	fs.UintVar(&vm.MemoryMiB, "guest-memory", 512, "with --guest-libvirt-uri: MiB of memory of each guest")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return errors.Wrap(err, errFlags)
	}
	if vm.URI != "" {
		simulate := false
		fs.Visit(func(f *flag.Flag) { simulate = simulate || (f.Name == "simulate-guests" && *guests) })
		if simulate {
			return errors.New(errBoth)
		}
		*guests = false
	}
	opts := []gcpfake.Option{
		gcpfake.WithAddress(*address),
		gcpfake.WithProjects(strings.Split(*projects, ",")...),
		gcpfake.WithZones(strings.Split(*zones, ",")...),
		gcpfake.WithOperationPolls(*polls),
		gcpfake.WithInstanceBoot(*provisioning, *staging),
	}
	if *requireAuth {
		opts = append(opts, gcpfake.WithRequireAuth())
	}
	if *strict {
		opts = append(opts, gcpfake.WithStrictAddressDelete())
	}
	s := gcpfake.New(opts...)
	if err := s.Start(); err != nil {
		return errors.Wrap(err, errStart)
	}
	if _, err := fmt.Fprintln(stdout, s.URL()); err != nil {
		s.Close()
		return errors.Wrap(err, errPrint)
	}
	var done chan struct{}
	switch {
	case vm.URI != "":
		vm.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "gcp-fake: "+format+"\n", args...) }
		r, err := guestvm.Start(s, vm)
		if err != nil {
			s.Close()
			return errors.Wrap(err, errGuest)
		}
		done = make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
	case *guests:
		go proxyguest.Run(ctx, s, proxyguest.DefaultEvery)
	}
	<-ctx.Done()
	if done != nil {
		<-done // the guests are gone
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Shutdown(shutdown)
}
