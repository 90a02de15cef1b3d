// Package gcpfake is an in-process fake of the Compute Engine v1 REST API,
// written to be driven by the real client, cloud.google.com/go/compute/apiv1
// (v1.75.0), so the GCP backend is tested against the wire format it will
// meet in production. No public GCE emulator could be fetched here (see
// /work/shared/research/gcp-compute.md §2), hence this one.
//
// Point a client at it with
//
//	s := gcpfake.NewTestServer(t)
//	c, _ := compute.NewInstancesRESTClient(ctx, s.ClientOptions()...)
//
// # Faithful to
//
//   - Routes under /compute/v1/projects/{project}: instances insert, get,
//     delete, list, aggregatedList, start, stop, setMetadata (fingerprint
//     checked: 412 conditionNotMet "Supplied fingerprint does not match
//     current metadata fingerprint." when missing or stale; keys, duplicates,
//     256 KiB per value and 512 KiB in all checked as on insert; the change is
//     visible at once, with a new fingerprint), setLabels (labelFingerprint
//     checked: 412 conditionNotMet "Labels fingerprint either invalid or
//     resource labels have changed", location If-Match, when missing or
//     stale; labels checked as on insert; a new labelFingerprint), setTags
//     (tags.fingerprint checked: 412 conditionNotMet when missing or stale;
//     tags checked as on insert; a new fingerprint); addresses insert, get,
//     delete, list, setLabels (labelFingerprint checked: 412 conditionNotMet
//     when stale); firewalls insert, get, delete, list, patch; zone, region
//     and global operations get and wait. Every mutation returns its
//     operation, which completes as described under Time.
//   - JSON is protojson of the client's own computepb types, so field names
//     (networkIP, natIP, IPProtocol), uint64 ids as strings and enum names
//     are exactly what the client parses. Request bodies are decoded
//     strictly: an unknown field is a 400, as on GCE.
//   - Server-filled fields: id, creationTimestamp (RFC 3339, -08:00),
//     selfLink and zone/region links (https://www.googleapis.com/compute/v1/…,
//     not the fake's URL), machineType and network links, disks[].source,
//     networkInterfaces[].networkIP (lowest free of 10.128.0.0/20), an
//     ephemeral natIP (198.51.100.0/24) for an accessConfig without one,
//     metadata.fingerprint, labelFingerprint, tags.fingerprint, scheduling
//     defaults; firewall defaults (priority 1000, INGRESS, 0.0.0.0/0 source);
//     address allocation from 203.0.113.0/24 (WithStaticAddressRange) when
//     `address` is empty.
//   - Lifecycles: instances go PROVISIONING → STAGING → RUNNING; stop goes
//     STOPPING → TERMINATED and releases the ephemeral natIP (a new one on
//     start); delete goes STOPPING → gone. They move on when observed: a GET
//     of the instance, a poll of its operation, or a list of its zone. Addresses go RESERVING → RESERVED,
//     IN_USE with users[] while an instance's natIP uses them, and back to
//     RESERVED when it is deleted. A second call on an instance with a stop
//     or delete pending is 400 resourceNotReady.
//   - Operations: name, status (PENDING/RUNNING/DONE), progress, selfLink,
//     targetLink, targetId, operationType, zone/region, user, insertTime,
//     startTime, endTime; on failure error.errors[] (code, message,
//     errorDetails.quotaInfo for quotas) with or without
//     httpErrorStatusCode/httpErrorMessage. Note compute's op.Wait only
//     returns an error when httpErrorStatusCode is set: callers must read
//     op.Proto().GetError().
//   - requestId: must be a non-zero UUID (else 400 invalid); the same
//     requestId in the same project returns the first call's operation and
//     changes nothing, whatever the method.
//   - Errors use GCE's legacy envelope {"error":{"code","message",
//     "errors":[{"domain":"global","reason","message"}]}}, so the client
//     returns *apierror.APIError wrapping *googleapi.Error with the reason in
//     Errors[0].Reason: notFound (404), alreadyExists (409), invalid and
//     required (400, with GCE's "Invalid value for field …" / "Required
//     field … not specified" messages), resourceNotReady, and 401 required
//     when WithRequireAuth is on. Validation covers RFC 1035 names, label
//     keys and values, metadata keys, tag names, machineType and
//     sourceImage URL forms (a bare "e2-small" is refused, as GCE does),
//     IPv4 addresses, CIDRs, firewall protocols and ports.
//   - Filters (list and aggregatedList): `labels.k = "v"`, `!=`, `labels.k:*`,
//     `:` substring, `eq`/`ne` regexps, parentheses, NOT, AND, OR, terms
//     juxtaposed are ANDed. aggregatedList keys items by zones/<z>, lists every
//     known zone and puts warning NO_RESULTS_ON_PAGE on empty ones;
//     maxResults (≤ 500) and pageToken page through results.
//   - Guest attributes: instances.getGuestAttributes (variableKey → variableValue,
//     queryPath → queryValue.items, 404 notFound when nothing matches), and
//     MetadataServer, what a VM's guest sees at metadata.google.internal:
//     instance/attributes/ (?recursive=true: a JSON object), its keys, each
//     with an ETag and GCE's long poll (wait_for_change, last_etag,
//     timeout_sec; a waiter wakes on setMetadata, not on a timer),
//     instance/name|id|zone, project/project-id, and
//     instance/guest-attributes/<ns>/<key> GET/PUT/DELETE, which needs
//     enable-guest-attributes=TRUE (else 403). It requires
//     "Metadata-Flavor: Google" and refuses requests with X-Forwarded-For,
//     both 403. SetGuestAttribute and /_fake/ write as the guest would.
//   - OAuth: POST /token implements the jwt-bearer grant; keys made by
//     NewServiceAccountKey verify, others get invalid_grant.
//
// # Time
//
// The fake has no timers: time passes only when someone looks. An operation
// needs WithOperationPolls observations (GETs of it, or of its target) before
// it is DONE; /wait completes it at once. An instance boots over
// WithInstanceBoot observations (GETs of it, polls of its insert/start
// operation). Lists and the Go snapshot accessors observe nothing. This keeps
// tests deterministic and fast: with the default of one poll, op.Wait
// returns after its first poll and never sleeps its 1 s backoff.
//
// # Faults
//
// InjectError (sync HTTP errors, any code and reason, for N calls and/or a
// duration), Storm (503 backendError), FailOperations (op ends DONE with an
// error, nothing is created), AddLatency, SetQuota (QUOTA_EXCEEDED in the
// operation, with 403), SetInstanceStatus (changes behind the API's back),
// and Calls/CallCounts to count requests per API method id. The same knobs
// are served under /_fake/ (see admin.go) for processes outside the test.
//
// # Deliberately not implemented
//
//   - Every other resource and method (disks as resources, images, networks,
//     subnetworks, setLabels of other resources, instance templates, …).
//   - The message of a setTags with a stale fingerprint is the fake's own
//     ("Supplied fingerprint does not match current fingerprint."): GCE's
//     wording is unverified, its code and reason are documented.
//     Networks, subnetworks, images and machine types are not checked for
//     existence, only for URL form.
//   - Regional quotas, CPU quota on start, deletionProtection enforcement,
//     IPv6, more than one accessConfig per interface.
//   - Patch semantics are top-level JSON merge patch only; since protojson
//     omits empty lists, a client cannot clear a list with PATCH (true of
//     real GCE through this client too).
//   - Whether real GCE refuses to delete an IN_USE address is unverified;
//     the fake allows it unless WithStrictAddressDelete.
//   - Auth is all-or-nothing: no IAM, no scopes, no per-project permissions.
//     Self-signed JWTs used directly as bearer tokens are not accepted.
//   - TLS, gRPC, and the real wait's 2-minute long poll.
//   - Guest attributes: no selfLink in the response, no size limits, and
//     they survive a stop (whether GCE keeps them is unverified); the
//     metadata server's other paths (tokens, network-interfaces, …) are
//     not served, nor wait_for_change on them or on guest attributes.
package gcpfake
