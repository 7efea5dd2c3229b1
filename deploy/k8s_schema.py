#!/usr/bin/python3
"""A small schema check of Kubernetes manifests, for CI machines without a cluster or
kubeconform (Debian packages neither): for each kind planfarm's manifests use, the fields the
API server requires and the references between objects. Not the full OpenAPI schema: a field
it does not know is not an error, a missing required one or a dangling reference is.

    python3 deploy/k8s_schema.py deploy/k8s/*.yaml

Checked: apiVersion per kind; metadata.name a DNS-1123 label; workloads (Deployment,
StatefulSet, DaemonSet): spec.selector.matchLabels equal to a subset of the pod template's
labels, at least one container with name and image, unique container names, every
volumeMount naming a volume (or a StatefulSet volumeClaimTemplate), named probe ports declared
by the container; StatefulSet: serviceName naming a Service in the files; Service: ports with
a port number, a selector matching some workload's pod labels, and targetPort names that
container declares; HorizontalPodAutoscaler (autoscaling/v2): scaleTargetRef naming a workload
in the files, 1 <= minReplicas <= maxReplicas, metrics present. Needs python3-yaml.
Exit status 0 when every file passes, 1 otherwise (each problem on one line: file: object:
path: problem).
"""

import re
import sys

import yaml

API_VERSIONS = {"Service": "v1", "Secret": "v1", "ConfigMap": "v1",
                "Deployment": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1",
                "HorizontalPodAutoscaler": "autoscaling/v2"}
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def get(obj, path):
    """obj at a dotted path, or None."""
    for key in path.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


class Checker:
    def __init__(self):
        self.problems = []
        self.objects = []  # (file, doc)

    def fail(self, where, doc, path, msg):
        name = "%s/%s" % (doc.get("kind", "?"), get(doc, "metadata.name") or "?")
        self.problems.append("%s: %s: %s: %s" % (where, name, path, msg))

    def load(self, path):
        try:
            with open(path) as f:
                docs = [d for d in yaml.safe_load_all(f) if d is not None]
        except (OSError, yaml.YAMLError) as e:
            self.problems.append("%s: %s" % (path, e))
            return
        for d in docs:
            if not isinstance(d, dict):
                self.problems.append("%s: a document is not a mapping" % path)
                continue
            self.objects.append((path, d))

    def require(self, where, doc, path, types):
        v = get(doc, path)
        if v is None:
            self.fail(where, doc, path, "required")
        elif not isinstance(v, types):
            self.fail(where, doc, path, "expected %s, got %s"
                      % ("/".join(t.__name__ for t in types), type(v).__name__))
        return v

    def check_common(self, where, doc):
        kind = doc.get("kind")
        if kind not in API_VERSIONS:
            self.fail(where, doc, "kind", "%r is not one this check knows" % kind)
            return False
        if doc.get("apiVersion") != API_VERSIONS[kind]:
            self.fail(where, doc, "apiVersion", "%r, expected %r"
                      % (doc.get("apiVersion"), API_VERSIONS[kind]))
        name = self.require(where, doc, "metadata.name", (str,))
        if isinstance(name, str) and not DNS_LABEL.match(name):
            self.fail(where, doc, "metadata.name", "%r is not a DNS-1123 label" % name)
        return True

    def check_workload(self, where, doc):
        sel = self.require(where, doc, "spec.selector.matchLabels", (dict,))
        labels = self.require(where, doc, "spec.template.metadata.labels", (dict,))
        if isinstance(sel, dict) and isinstance(labels, dict):
            for k, v in sel.items():
                if labels.get(k) != v:
                    self.fail(where, doc, "spec.selector.matchLabels.%s" % k,
                              "the pod template's labels do not have %s=%s" % (k, v))
        pod = get(doc, "spec.template.spec") or {}
        containers = self.require(where, doc, "spec.template.spec.containers", (list,))
        if not containers:
            self.fail(where, doc, "spec.template.spec.containers", "empty")
            return
        volumes = {v.get("name") for v in pod.get("volumes") or [] if isinstance(v, dict)}
        if doc["kind"] == "StatefulSet":
            volumes |= {get(t, "metadata.name") for t in
                        get(doc, "spec.volumeClaimTemplates") or [] if isinstance(t, dict)}
        seen = set()
        for i, c in enumerate(containers):
            path = "spec.template.spec.containers[%d]" % i
            if not isinstance(c, dict):
                self.fail(where, doc, path, "not a mapping")
                continue
            for key in ("name", "image"):
                if not isinstance(c.get(key), str) or not c.get(key):
                    self.fail(where, doc, path + "." + key, "required")
            if c.get("name") in seen:
                self.fail(where, doc, path + ".name", "%r repeated" % c.get("name"))
            seen.add(c.get("name"))
            if "args" in c and not all(isinstance(a, str) for a in c["args"]):
                self.fail(where, doc, path + ".args", "every argument must be a string")
            ports = {p.get("name") for p in c.get("ports") or [] if isinstance(p, dict)}
            for j, p in enumerate(c.get("ports") or []):
                if not isinstance(get(p, "containerPort"), int):
                    self.fail(where, doc, "%s.ports[%d].containerPort" % (path, j), "required")
            for j, m in enumerate(c.get("volumeMounts") or []):
                if get(m, "name") not in volumes:
                    self.fail(where, doc, "%s.volumeMounts[%d]" % (path, j),
                              "no volume named %r" % get(m, "name"))
                if not isinstance(get(m, "mountPath"), str):
                    self.fail(where, doc, "%s.volumeMounts[%d].mountPath" % (path, j),
                              "required")
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                for kind in ("httpGet", "tcpSocket"):
                    port = get(c, "%s.%s.port" % (probe, kind))
                    if isinstance(port, str) and port not in ports:
                        self.fail(where, doc, "%s.%s.%s.port" % (path, probe, kind),
                                  "the container declares no port %r" % port)
        if doc["kind"] == "StatefulSet":
            svc = self.require(where, doc, "spec.serviceName", (str,))
            if svc and not self.find("Service", svc):
                self.fail(where, doc, "spec.serviceName", "no Service %r in the files" % svc)
            for i, t in enumerate(get(doc, "spec.volumeClaimTemplates") or []):
                if get(t, "spec.resources.requests.storage") is None:
                    self.fail(where, doc, "spec.volumeClaimTemplates[%d].spec.resources."
                              "requests.storage" % i, "required")
                if not get(t, "spec.accessModes"):
                    self.fail(where, doc, "spec.volumeClaimTemplates[%d].spec.accessModes" % i,
                              "required")

    def check_service(self, where, doc):
        ports = self.require(where, doc, "spec.ports", (list,))
        sel = self.require(where, doc, "spec.selector", (dict,))
        targets = [d for _, d in self.objects if d.get("kind") in WORKLOADS and sel and
                   all((get(d, "spec.template.metadata.labels") or {}).get(k) == v
                       for k, v in sel.items())]
        if sel and not targets:
            self.fail(where, doc, "spec.selector", "matches no workload's pods in the files")
        declared = {p.get("name") for d in targets
                    for c in get(d, "spec.template.spec.containers") or []
                    for p in c.get("ports") or [] if isinstance(p, dict)}
        for i, p in enumerate(ports or []):
            if not isinstance(get(p, "port"), int):
                self.fail(where, doc, "spec.ports[%d].port" % i, "required (an integer)")
            tp = get(p, "targetPort")
            if isinstance(tp, str) and targets and tp not in declared:
                self.fail(where, doc, "spec.ports[%d].targetPort" % i,
                          "no container of the selected pods declares port %r" % tp)

    def check_hpa(self, where, doc):
        kind = self.require(where, doc, "spec.scaleTargetRef.kind", (str,))
        name = self.require(where, doc, "spec.scaleTargetRef.name", (str,))
        if kind and name and not self.find(kind, name):
            self.fail(where, doc, "spec.scaleTargetRef", "no %s %r in the files" % (kind, name))
        lo = get(doc, "spec.minReplicas")
        hi = self.require(where, doc, "spec.maxReplicas", (int,))
        lo = 1 if lo is None else lo
        if isinstance(hi, int) and not (isinstance(lo, int) and 1 <= lo <= hi):
            self.fail(where, doc, "spec.minReplicas", "need 1 <= minReplicas <= maxReplicas")
        self.require(where, doc, "spec.metrics", (list,))

    def find(self, kind, name):
        return any(d.get("kind") == kind and get(d, "metadata.name") == name
                   for _, d in self.objects)

    def run(self):
        for where, doc in self.objects:
            if not self.check_common(where, doc):
                continue
            kind = doc["kind"]
            if kind in WORKLOADS:
                self.check_workload(where, doc)
            elif kind == "Service":
                self.check_service(where, doc)
            elif kind == "HorizontalPodAutoscaler":
                self.check_hpa(where, doc)
        return self.problems


def main(argv):
    if not argv:
        print("usage: k8s_schema.py MANIFEST.yaml...", file=sys.stderr)
        return 2
    c = Checker()
    for path in argv:
        c.load(path)
    problems = c.run()
    for p in problems:
        print(p)
    print("k8s_schema: %d objects in %d files, %d problems" % (len(c.objects), len(argv),
                                                            len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
