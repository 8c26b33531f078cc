package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/netplan"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/served"
	"github.com/kube-fstack/kube-fstack/operator/internal/claims"
)

const (
	// EndpointSliceManagedBy is the value of discoveryv1.LabelManagedBy on the slices the
	// operator writes. Kubernetes' own controllers name themselves <controller>.<their domain>
	// (endpointslice-controller.k8s.io, endpointslicemirroring-controller.k8s.io): this follows
	// that form, and each controller leaves the others' slices alone.
	EndpointSliceManagedBy = "endpointslice-controller.kubefstack.io"
	// maxEndpointsPerSlice is Kubernetes' default (--max-endpoints-per-slice).
	maxEndpointsPerSlice = 100
	// serviceStackIndex indexes the cached Services by the StackInstance they name, so a pod's
	// change finds its Services without listing the namespace's.
	serviceStackIndex = "kubefstack.io/stack-service"
)

// The reasons of the Events the EndpointSlice controller records on a Service.
const (
	// EventSelectorIgnored: the Service has a selector, so Kubernetes' own controller
	// publishes the pods' kernel IPs; the operator publishes nothing for it.
	EventSelectorIgnored = "SelectorIgnored"
	// EventPodNotPublished: a bound pod has no served address the operator can publish.
	EventPodNotPublished = "PodNotPublished"
	// EventInvalidStackAnnotation: the annotation's value names no possible StackInstance.
	EventInvalidStackAnnotation = "InvalidStackAnnotation"
	// EventNamespaceNotOptedIn: the Service's namespace is not labelled for injection, so no pod
	// of it was injected and none is published.
	EventNamespaceNotOptedIn = "NamespaceNotOptedIn"
)

// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list;watch;create;update;delete

// EndpointSliceReconciler publishes the EndpointSlices of the Services that opt in with
// podcontract.ServiceStackAnnotation: one endpoint per bound pod's served address, ready while the pod is
// Ready and not terminating, serving while it is Ready, terminating from its deletion, so a
// rollout drains a pod (see the injector's preStop) before its dataplane stops.
type EndpointSliceReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Namespace is the operator's, where the claims it made live.
	Namespace string
}

// Reconcile makes the operator's slices of one Service what its bound pods say.
func (r *EndpointSliceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	svc := &corev1.Service{}
	err := r.Client.Get(ctx, req.NamespacedName, svc)
	if apierrors.IsNotFound(err) {
		// Owner references let the garbage collector do this too; where none runs (or before
		// it does), the slices must not outlive their Service.
		return ctrl.Result{}, r.deleteSlices(ctx, req.NamespacedName, nil)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	stack, publish, err := r.publishable(ctx, svc)
	if err != nil {
		return ctrl.Result{}, err // a read that failed: the slices stay as they are
	}
	if !publish {
		return ctrl.Result{}, r.deleteSlices(ctx, req.NamespacedName, nil)
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(svc.Namespace), client.MatchingLabels{fsv1.StackLabel: stack},
		client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	held, err := r.heldAddresses(ctx, svc.Namespace, stack)
	if err != nil {
		return ctrl.Result{}, err
	}
	want, skipped := desiredSlices(svc, pods.Items, held)
	for _, s := range skipped {
		if !s.pending {
			r.warn(svc, EventPodNotPublished, "pod %s is not in the Service's endpoints: %s", s.pod, s.why)
		}
	}
	var errs []error
	keep := map[string]bool{}
	for _, s := range want {
		keep[s.Name] = true
		if err := r.apply(ctx, svc, s); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, r.deleteSlices(ctx, req.NamespacedName, keep))
	return ctrl.Result{}, kerrors.NewAggregate(errs)
}

// publishable says whether the operator publishes slices for svc, and of which stack: a Service
// that opts in (annotated with a valid StackInstance name), has no selector, is no ExternalName
// and is in a namespace that opted in. A Service it refuses for a reason its owner can fix gets
// an Event saying so.
func (r *EndpointSliceReconciler) publishable(ctx context.Context, svc *corev1.Service) (string, bool, error) {
	stack, ok := svc.Annotations[podcontract.ServiceStackAnnotation]
	switch {
	case !ok || svc.DeletionTimestamp != nil || svc.Spec.Type == corev1.ServiceTypeExternalName:
		return "", false, nil
	case len(svc.Spec.Selector) > 0:
		r.warn(svc, EventSelectorIgnored,
			"the Service has a selector, so Kubernetes publishes the pods' kernel IPs, where F-Stack does not listen; "+
				"remove spec.selector for the operator to publish the served addresses of StackInstance %s's pods (annotation %s)",
			podcontract.Printable(stack), podcontract.ServiceStackAnnotation)
		return "", false, nil
	}
	if errs := validation.IsDNS1123Subdomain(stack); len(errs) > 0 || len(stack) > validation.LabelValueMaxLength {
		r.warn(svc, EventInvalidStackAnnotation,
			"annotation %s=%q names no StackInstance: set it to the name of a StackInstance in namespace %s", podcontract.ServiceStackAnnotation,
			podcontract.Printable(stack), svc.Namespace)
		return "", false, nil
	}
	optedIn, err := r.namespaceOptedIn(ctx, svc.Namespace)
	if err != nil || !optedIn {
		if err == nil {
			r.warn(svc, EventNamespaceNotOptedIn,
				"namespace %s is not labelled %s=enabled: the operator publishes only the pods it injected, in namespaces that opted in",
				svc.Namespace, fsv1.InjectionLabel)
		}
		return "", false, err
	}
	return stack, true, nil
}

// namespaceOptedIn says whether ns carries the injection label (the manager's metadata-only
// informer of Namespaces, which the pod webhook shares). In any other namespace no pod was
// injected, so whatever its pods' annotations say was written by their owner, not the injector.
func (r *EndpointSliceReconciler) namespaceOptedIn(ctx context.Context, ns string) (bool, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Client.Get(ctx, client.ObjectKey{Name: ns}, meta); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return meta.Labels[fsv1.InjectionLabel] == "enabled", nil
}

// hold is who may publish a claimed address: the UID of the pod its claim is bound to (empty: not
// bound yet), unless problem says why nobody may.
type hold struct {
	pod     types.UID
	problem string
}

// heldAddresses are the addresses the claims of the stack's pods hold, each with the UID of the
// pod its claim is bound to: a pod's annotation is the pod's to write, the claims are the
// operator's, so only an address a claim gives the pod is published for it, and only inside its
// DataNetwork's subnets. A claim is the operator's in its namespace, named after its network and
// address; or, a claim an older operator made (until the controller moves it), in the stack's
// namespace, named after the stack and bound by an owner reference. A claim not bound yet (the
// operator binds it once the pod exists) publishes nothing yet.
func (r *EndpointSliceReconciler) heldAddresses(ctx context.Context, ns, stack string) (map[netip.Addr]hold, error) {
	list := &fsv1.AddressClaimList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{ClaimStackIndex: StackKey(ns, stack)}); err != nil {
		return nil, fmt.Errorf("list the address claims of StackInstance %q: %w", stack, err)
	}
	held := make(map[netip.Addr]hold, len(list.Items))
	subnets := &networkSubnets{reader: r.Client, nets: map[string]*netplan.Network{}}
	for i := range list.Items {
		c := &list.Items[i]
		a, err := netip.ParseAddr(c.Spec.Address)
		if err != nil || c.Spec.StackInstance != stack || !r.operatorsClaim(c, ns, stack, a.Unmap()) {
			continue
		}
		h := hold{pod: claims.BoundTo(c).UID}
		if !claims.IsLegacy(c) {
			if h.problem, err = subnets.outside(ctx, c.Spec.Network, a.Unmap()); err != nil {
				return nil, err
			}
		}
		if cur, ok := held[a.Unmap()]; ok && cur.pod != "" && h.pod == "" {
			continue // a legacy claim and its move: the bound one says
		}
		held[a.Unmap()] = h
	}
	return held, nil
}

// operatorsClaim says whether c is a claim the operator made for a pod of stack in ns, as it
// names and places them.
func (r *EndpointSliceReconciler) operatorsClaim(c *fsv1.AddressClaim, ns, stack string, a netip.Addr) bool {
	if claims.IsLegacy(c) {
		return c.Namespace == ns && c.Name == fsv1.AddressClaimName(stack, a)
	}
	return c.Namespace == r.Namespace && c.Spec.PodNamespace == ns && c.Name == fsv1.NetworkAddressClaimName(c.Spec.Network, a)
}

// The EndpointSlice controller publishes only addresses inside their DataNetwork's subnets.
// +kubebuilder:rbac:groups=kubefstack.io,resources=datanetworks,verbs=get;list;watch

// networkSubnets reads each DataNetwork once per reconcile.
type networkSubnets struct {
	reader client.Reader
	nets   map[string]*netplan.Network
}

// outside says why a may not be published on network (it is outside its subnets, or the
// network is missing or invalid), or "".
func (n *networkSubnets) outside(ctx context.Context, network string, a netip.Addr) (string, error) {
	plan, seen := n.nets[network]
	if !seen {
		dn := &fsv1.DataNetwork{}
		err := n.reader.Get(ctx, client.ObjectKey{Name: network}, dn)
		if err != nil && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("read DataNetwork %q: %w", network, err)
		}
		if err == nil {
			plan, _ = netplan.Parse(dn.Plan())
		}
		n.nets[network] = plan
	}
	if plan == nil {
		return fmt.Sprintf("its DataNetwork %q does not exist or is invalid", network), nil
	}
	if _, ok := plan.Subnet(a); !ok {
		return fmt.Sprintf("it is outside DataNetwork %q's subnets", network), nil
	}
	return "", nil
}

// warn records a Warning Event on svc: every Event of this controller says why something is not
// published.
func (r *EndpointSliceReconciler) warn(svc *corev1.Service, reason, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, reason, "PublishEndpoints", note, args...)
	}
}

// apply creates or updates one slice. Its name is derived from what it holds (see
// desiredSlices): a create that meets an existing slice is the cache lagging, not a conflict.
func (r *EndpointSliceReconciler) apply(ctx context.Context, svc *corev1.Service, want *discoveryv1.EndpointSlice) error {
	if err := controllerutil.SetControllerReference(svc, want, r.Client.Scheme()); err != nil {
		return err
	}
	cur := &discoveryv1.EndpointSlice{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), cur)
	if apierrors.IsNotFound(err) {
		err = r.Client.Create(ctx, want)
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		// The cache holds only the operator's slices: one it cannot see is someone else's.
		if err = r.Client.Get(ctx, client.ObjectKeyFromObject(want), cur); apierrors.IsNotFound(err) {
			return fmt.Errorf("EndpointSlice %s/%s exists and is not managed by %s: delete or rename it", want.Namespace, want.Name, EndpointSliceManagedBy)
		}
	}
	if err != nil {
		return err
	}
	if cur.Labels[discoveryv1.LabelManagedBy] != EndpointSliceManagedBy {
		return fmt.Errorf("EndpointSlice %s/%s exists and is not managed by %s: delete or rename it", cur.Namespace, cur.Name, EndpointSliceManagedBy)
	}
	if equality.Semantic.DeepEqual(cur.Labels, want.Labels) && equality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) &&
		equality.Semantic.DeepEqual(cur.Ports, want.Ports) && cur.AddressType == want.AddressType &&
		equality.Semantic.DeepEqual(cur.OwnerReferences, want.OwnerReferences) {
		return nil
	}
	want.ResourceVersion = cur.ResourceVersion
	return r.Client.Update(ctx, want)
}

// deleteSlices deletes the operator's slices of the Service except those named in keep.
func (r *EndpointSliceReconciler) deleteSlices(ctx context.Context, svc types.NamespacedName, keep map[string]bool) error {
	list := &discoveryv1.EndpointSliceList{}
	if err := r.Client.List(ctx, list, client.InNamespace(svc.Namespace), client.MatchingLabels{
		discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: EndpointSliceManagedBy}); err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		if s := &list.Items[i]; !keep[s.Name] {
			log.FromContext(ctx).V(1).Info("deleting EndpointSlice", "slice", s.Name)
			errs = append(errs, client.IgnoreNotFound(r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID})))
		}
	}
	return kerrors.NewAggregate(errs)
}

// skippedPod is a pod left out of the slices, and why; pending is a pod whose claim the operator
// has not bound yet, a moment after the pod's creation, which is no one's to fix.
type skippedPod struct {
	pod, why string
	pending  bool
}

// desiredSlices computes the Service's slices from its bound pods: endpoints grouped by address
// family and by the ports they resolve to (a named targetPort can resolve differently per pod,
// as in Kubernetes' own controller), at most maxEndpointsPerSlice each, in a stable order.
func desiredSlices(svc *corev1.Service, pods []corev1.Pod, held map[netip.Addr]hold) ([]*discoveryv1.EndpointSlice, []skippedPod) {
	type group struct {
		family discoveryv1.AddressType
		ports  []discoveryv1.EndpointPort
		eps    []discoveryv1.Endpoint
	}
	groups := map[string]*group{}
	var skipped []skippedPod
	port := svc.Annotations[podcontract.ServiceStackPortAnnotation]
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		addrs, err := servedAndHeld(p, port, held)
		if err != nil {
			skipped = append(skipped, skippedPod{pod: p.Name, why: err.Error(), pending: errors.Is(err, errClaimPending)})
			continue
		}
		ports := servicePorts(svc, p)
		for _, a := range addrs {
			family := discoveryv1.AddressTypeIPv4
			if a.Is6() {
				family = discoveryv1.AddressTypeIPv6
			}
			key := string(family) + "/" + portsKey(ports)
			g := groups[key]
			if g == nil {
				g = &group{family: family, ports: ports}
				groups[key] = g
			}
			g.eps = append(g.eps, endpointOf(p, a))
		}
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []*discoveryv1.EndpointSlice
	for _, k := range keys {
		g := groups[k]
		slices.SortFunc(g.eps, func(a, b discoveryv1.Endpoint) int { return strings.Compare(a.Addresses[0], b.Addresses[0]) })
		for n := 0; n*maxEndpointsPerSlice < len(g.eps); n++ {
			eps := g.eps[n*maxEndpointsPerSlice : min(len(g.eps), (n+1)*maxEndpointsPerSlice)]
			out = append(out, &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: svc.Namespace,
					Name:      sliceName(svc.Name, g.family, k, n),
					Labels:    sliceLabels(svc),
				},
				AddressType: g.family,
				Endpoints:   eps,
				Ports:       g.ports,
			})
		}
	}
	return out, skipped
}

// errClaimPending: the pod's address is claimed, and the claim not bound to a pod yet.
var errClaimPending = errors.New("its address claims are not bound to it yet")

// servedAndHeld are the addresses p serves on the stack port that an AddressClaim bound to p
// holds, inside its network's subnets; an address the pod names without such a claim is never
// published, and said.
func servedAndHeld(p *corev1.Pod, port string, held map[netip.Addr]hold) ([]netip.Addr, error) {
	addrs, err := served.Addresses(p, port)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	var unheld, outside []string
	pending := false
	for _, a := range addrs {
		h, ok := held[a]
		switch {
		case ok && h.pod == p.UID && h.problem != "":
			outside = append(outside, a.String()+": "+h.problem)
		case ok && h.pod == p.UID:
			out = append(out, a)
		case ok && h.pod == "":
			pending = true
		default:
			unheld = append(unheld, a.String())
		}
	}
	switch {
	case len(unheld) > 0:
		return nil, fmt.Errorf("its %s annotation names %s, which no AddressClaim of the pod holds (admission claims the addresses "+
			"it gives a pod, and the operator binds each claim to its pod): nothing of it is published", podcontract.AddressesAnnotation,
			strings.Join(unheld, ", "))
	case len(outside) > 0:
		return nil, fmt.Errorf("its address %s: nothing of it is published", strings.Join(outside, "; "))
	case pending:
		return nil, errClaimPending
	}
	return out, nil
}

// sliceName is stable for what the slice holds (family, ports, chunk), so a reconcile on a
// stale cache updates the slice it would have created rather than adding a duplicate.
func sliceName(svc string, family discoveryv1.AddressType, key string, n int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", key, n)))
	prefix := svc
	if len(prefix) > 63 {
		prefix = prefix[:63]
	}
	return fmt.Sprintf("%s-fstack-%s-%s", prefix, strings.ToLower(string(family)), hex.EncodeToString(sum[:5]))
}

func sliceLabels(svc *corev1.Service) map[string]string {
	l := map[string]string{
		discoveryv1.LabelServiceName: svc.Name,
		discoveryv1.LabelManagedBy:   EndpointSliceManagedBy,
	}
	// kube-proxy skips headless Services' slices by this label, as it does Kubernetes' own.
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		l[corev1.IsHeadlessService] = ""
	}
	return l
}

// endpointOf is one served address of a pod, its conditions following the pod's: Ready makes
// it ready and serving; a deletion makes it terminating and not ready, serving while the pod is
// still Ready (it drains: kube-proxy sends new connections elsewhere, and to it only when no
// endpoint is ready).
func endpointOf(p *corev1.Pod, a netip.Addr) discoveryv1.Endpoint {
	ready := podReady(p)
	terminating := p.DeletionTimestamp != nil
	ep := discoveryv1.Endpoint{
		Addresses: []string{a.String()},
		Conditions: discoveryv1.EndpointConditions{
			Ready:       new(ready && !terminating),
			Serving:     new(ready),
			Terminating: new(terminating),
		},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
	}
	if p.Spec.NodeName != "" {
		ep.NodeName = new(p.Spec.NodeName)
	}
	return ep
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// servicePorts are the Service's ports as the pod serves them: a numeric targetPort as it is
// (none: the port itself), a named one resolved against the pod's app containers' ports. A
// name the pod does not declare leaves that port out for that pod, as Kubernetes does.
func servicePorts(svc *corev1.Service, p *corev1.Pod) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(svc.Spec.Ports))
	for _, sp := range svc.Spec.Ports {
		n := sp.TargetPort.IntValue()
		if sp.TargetPort.StrVal != "" {
			n = containerPort(p, sp.TargetPort.StrVal, sp.Protocol)
			if n == 0 {
				continue
			}
		} else if n == 0 {
			n = int(sp.Port)
		}
		out = append(out, discoveryv1.EndpointPort{Name: new(sp.Name), Protocol: new(sp.Protocol), Port: new(int32(n)),
			AppProtocol: sp.AppProtocol})
	}
	return out
}

func containerPort(p *corev1.Pod, name string, proto corev1.Protocol) int {
	for _, c := range p.Spec.Containers {
		if c.Name == podcontract.DataplaneContainer {
			continue // its ports are the supervisor's, on the kernel's address
		}
		for _, cp := range c.Ports {
			if cp.Name == name && (cp.Protocol == proto || cp.Protocol == "" && proto == corev1.ProtocolTCP) {
				return int(cp.ContainerPort)
			}
		}
	}
	return 0
}

func portsKey(ports []discoveryv1.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&b, "%s:%s:%d;", *p.Name, *p.Protocol, *p.Port)
	}
	return b.String()
}

// SetupWithManager watches the Services (the cache holds them trimmed, see TrimService), the
// operator's slices, and the bound pods' changes that move an endpoint.
func (r *EndpointSliceReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Service{}, serviceStackIndex, func(o client.Object) []string {
		if v, ok := o.GetAnnotations()[podcontract.ServiceStackAnnotation]; ok {
			return []string{v}
		}
		return nil
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("endpointslice").
		For(&corev1.Service{}, builder.WithPredicates(serviceChanged())).
		Owns(&discoveryv1.EndpointSlice{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podToServices), builder.WithPredicates(EndpointMayDiffer())).
		// A claim bound to its pod (or released) changes what the pod may publish, and a
		// DataNetwork's subnets which of its addresses may be.
		Watches(&fsv1.AddressClaim{}, handler.EnqueueRequestsFromMapFunc(r.claimToServices)).
		Watches(&fsv1.DataNetwork{}, handler.EnqueueRequestsFromMapFunc(r.allServices)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}

// podToServices maps a pod (labelled with its stack) to the Services of its stack.
func (r *EndpointSliceReconciler) podToServices(ctx context.Context, o client.Object) []reconcile.Request {
	return r.stackServices(ctx, o.GetNamespace(), o.GetLabels()[fsv1.StackLabel])
}

// claimToServices maps an AddressClaim to the Services of its pod's stack.
func (r *EndpointSliceReconciler) claimToServices(ctx context.Context, o client.Object) []reconcile.Request {
	c, ok := o.(*fsv1.AddressClaim)
	if !ok {
		return nil
	}
	return r.stackServices(ctx, claims.BoundTo(c).Namespace, c.Spec.StackInstance)
}

// allServices maps a DataNetwork's change to every Service that opts in (they are few, and a
// DataNetwork changes seldom).
func (r *EndpointSliceReconciler) allServices(ctx context.Context, _ client.Object) []reconcile.Request {
	svcs := &corev1.ServiceList{}
	if err := r.Client.List(ctx, svcs, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing the Services")
		return nil
	}
	var out []reconcile.Request
	for i := range svcs.Items {
		if _, ok := svcs.Items[i].Annotations[podcontract.ServiceStackAnnotation]; ok {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&svcs.Items[i])})
		}
	}
	return out
}

// stackServices are the Services of namespace ns that name stack.
func (r *EndpointSliceReconciler) stackServices(ctx context.Context, ns, stack string) []reconcile.Request {
	if stack == "" || ns == "" {
		return nil
	}
	svcs := &corev1.ServiceList{}
	if err := r.Client.List(ctx, svcs, client.InNamespace(ns), client.MatchingFields{serviceStackIndex: stack},
		client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing the Services of a stack", "namespace", ns, "stack", stack)
		return nil
	}
	out := make([]reconcile.Request, 0, len(svcs.Items))
	for i := range svcs.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&svcs.Items[i])})
	}
	return out
}

// serviceChanged lets through the Service events that can change its slices: kubelet and
// other controllers do not update Services, but their status (load balancers) does.
func serviceChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Service)
		n, ok2 := e.ObjectNew.(*corev1.Service)
		if !ok1 || !ok2 {
			return true
		}
		return o.Annotations[podcontract.ServiceStackAnnotation] != n.Annotations[podcontract.ServiceStackAnnotation] ||
			o.Annotations[podcontract.ServiceStackPortAnnotation] != n.Annotations[podcontract.ServiceStackPortAnnotation] ||
			(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
			!equality.Semantic.DeepEqual(o.Spec, n.Spec)
	}}
}

// EndpointMayDiffer lets through the pod events that can move an endpoint: creates, deletes,
// and updates of what desiredSlices reads.
func EndpointMayDiffer() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Pod)
		n, ok2 := e.ObjectNew.(*corev1.Pod)
		if !ok1 || !ok2 {
			return true
		}
		return o.Labels[fsv1.StackLabel] != n.Labels[fsv1.StackLabel] ||
			(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
			o.Status.Phase != n.Status.Phase || podReady(o) != podReady(n) ||
			o.Spec.NodeName != n.Spec.NodeName ||
			o.Annotations[podcontract.AddressesAnnotation] != n.Annotations[podcontract.AddressesAnnotation]
	}}
}

// TrimService is the transform of the manager's Service cache: every Service of the cluster is
// watched (a selector cannot filter on an annotation), so only what the controller reads is
// kept, bounded whatever the Service carries (one selector entry, its first
// maxCachedServicePorts ports), and a Service that does not opt in keeps its name alone.
func TrimService(obj any) (any, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	t := &corev1.Service{TypeMeta: s.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion,
		Generation: s.Generation, DeletionTimestamp: s.DeletionTimestamp,
	}}
	stack, ok := s.Annotations[podcontract.ServiceStackAnnotation]
	if !ok {
		return t, nil
	}
	t.Annotations = map[string]string{podcontract.ServiceStackAnnotation: stack}
	if p, ok := s.Annotations[podcontract.ServiceStackPortAnnotation]; ok {
		t.Annotations[podcontract.ServiceStackPortAnnotation] = p
	}
	t.Spec = corev1.ServiceSpec{Selector: oneLabel(s.Spec.Selector), Ports: s.Spec.Ports[:min(len(s.Spec.Ports), maxCachedServicePorts)],
		ClusterIP: s.Spec.ClusterIP, Type: s.Spec.Type}
	return t, nil
}

// maxCachedServicePorts bounds the ports a cached Service keeps, and so the ports of the slices
// published for it: a Service's ports are its writer's to multiply (each a few dozen bytes of the
// operator's heap, and nothing in the API bounds their number).
const maxCachedServicePorts = 100

// oneLabel stands for a selector in the cache: the controller only asks whether a Service has
// one (it publishes for Services without), and a tenant's selector may be a megabyte. One entry,
// whose key and value the API server bounds, says the same.
func oneLabel(sel map[string]string) map[string]string {
	if len(sel) == 0 {
		return nil
	}
	k := ""
	for key := range sel {
		if k == "" || key < k {
			k = key
		}
	}
	return map[string]string{k: sel[k]}
}

// EndpointSliceCache is what the manager's cache holds for this controller: every Service,
// trimmed (TrimService), and only the operator's own EndpointSlices (Kubernetes' controller
// writes one or more for every Service with a selector).
func EndpointSliceCache() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Service{}:            {Transform: TrimService},
		&discoveryv1.EndpointSlice{}: {Label: labels.SelectorFromSet(labels.Set{discoveryv1.LabelManagedBy: EndpointSliceManagedBy})},
	}
}
