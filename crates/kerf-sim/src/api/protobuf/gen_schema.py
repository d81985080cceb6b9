#!/usr/bin/env python3
"""Regenerates schema.txt, the protobuf schema kerf-sim decodes request bodies with.

The schema is read from the Go type data of a Kubernetes Go binary (kubectl): every struct
of k8s.io/api and k8s.io/apimachinery keeps its field names, struct tags (`json:"..."` and
`protobuf:"..."`) and field types there, which is all the decoder needs: field numbers,
JSON names, `omitempty`, and whether a field is a pointer (so an explicit zero is kept).

    python3 gen_schema.py "$(command -v kubectl)" schema.txt

Works on x86-64 ELF binaries built by Go 1.21 or later (the abi.Type layout of those).
"""
import re
import struct
import sys

# (apiVersion, kind, Go type): the kinds whose protobuf bodies are decoded.
ROOTS = [
    ("v1", "Pod", "k8s.io/api/core/v1.Pod"),
    ("v1", "Node", "k8s.io/api/core/v1.Node"),
    ("v1", "Namespace", "k8s.io/api/core/v1.Namespace"),
    ("v1", "Event", "k8s.io/api/core/v1.Event"),
    ("v1", "ConfigMap", "k8s.io/api/core/v1.ConfigMap"),
    ("v1", "Secret", "k8s.io/api/core/v1.Secret"),
    ("apps/v1", "Deployment", "k8s.io/api/apps/v1.Deployment"),
    ("apps/v1", "ReplicaSet", "k8s.io/api/apps/v1.ReplicaSet"),
    ("apps/v1", "StatefulSet", "k8s.io/api/apps/v1.StatefulSet"),
    ("apps/v1", "DaemonSet", "k8s.io/api/apps/v1.DaemonSet"),
    ("autoscaling/v1", "Scale", "k8s.io/api/autoscaling/v1.Scale"),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "k8s.io/api/autoscaling/v2.HorizontalPodAutoscaler"),
    ("policy/v1", "PodDisruptionBudget", "k8s.io/api/policy/v1.PodDisruptionBudget"),
    ("policy/v1", "Eviction", "k8s.io/api/policy/v1.Eviction"),
    ("coordination.k8s.io/v1", "Lease", "k8s.io/api/coordination/v1.Lease"),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration",
     "k8s.io/api/admissionregistration/v1.MutatingWebhookConfiguration"),
]
# Types with their own protobuf and JSON encodings.
SPECIAL = {
    "k8s.io/apimachinery/pkg/api/resource.Quantity": "Quantity",
    "k8s.io/apimachinery/pkg/util/intstr.IntOrString": "IntOrString",
    "k8s.io/apimachinery/pkg/apis/meta/v1.Time": "Time",
    "k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime": "MicroTime",
    "k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1": "FieldsV1",
}
SCALAR = {"string": "string", "bool": "bool", "int32": "int32", "int64": "int64"}
KIND = {1: "bool", 5: "int32", 6: "int64", 8: "uint8", 21: "map", 22: "ptr", 23: "slice",
        24: "string", 25: "struct"}


class GoBinary:
    """The struct types of a Go ELF binary, walked from its typelinks."""

    def __init__(self, path):
        self.data = open(path, "rb").read()
        shoff = struct.unpack_from("<Q", self.data, 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", self.data, 0x3A)
        secs = [struct.unpack_from("<IIQQQQ", self.data, shoff + i * shentsize)
                for i in range(shnum)]
        names = secs[shstrndx][4]
        self.secs = {self.cstr(names + s[0]): s for s in secs}
        self.base = self.secs[".rodata"][3]
        self.structs = {}

    def cstr(self, off):
        return self.data[off:self.data.index(b"\0", off)].decode()

    def off(self, addr):
        for s in self.secs.values():
            if s[1] != 8 and s[3] <= addr < s[3] + s[5]:
                return s[4] + addr - s[3]
        raise ValueError(hex(addr))

    def u8(self, a):
        return self.data[self.off(a)]

    def i32(self, a):
        return struct.unpack_from("<i", self.data, self.off(a))[0]

    def u64(self, a):
        return struct.unpack_from("<Q", self.data, self.off(a))[0]

    def varint(self, a):
        v, shift = 0, 0
        while True:
            b = self.u8(a)
            a += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v, a

    def name(self, a):
        flags = self.u8(a)
        n, p = self.varint(a + 1)
        text = self.data[self.off(p):self.off(p) + n].decode()
        tag = ""
        if flags & 2:
            tn, q = self.varint(p + n)
            tag = self.data[self.off(q):self.off(q) + tn].decode()
        return text, tag, flags

    def kind(self, t):
        return KIND.get(self.u8(t + 23) & 0x1F, "other")

    def type_name(self, t):
        text = self.name(self.base + self.i32(t + 40))[0]
        text = text[1:] if self.u8(t + 20) & 2 else text
        return text.rpartition(".")[2]

    def pkg_path(self, t):
        if not self.u8(t + 20) & 1:
            return ""
        extra = {"struct": 80, "ptr": 56, "slice": 56, "map": 88}.get(self.kind(t), 48)
        po = self.i32(t + extra)
        return self.name(self.base + po)[0] if po else ""

    def describe(self, t):
        k = self.kind(t)
        if k in ("ptr", "slice"):
            return {"k": k, "elem": self.describe(self.u64(t + 48))}
        if k == "map":
            return {"k": k, "key": self.describe(self.u64(t + 48)),
                    "elem": self.describe(self.u64(t + 56))}
        d = {"k": k, "name": self.pkg_path(t) + "." + self.type_name(t)}
        if k == "struct":
            self.visit(t)
        return d

    def visit(self, t):
        k = self.kind(t)
        if k in ("ptr", "slice"):
            return self.visit(self.u64(t + 48))
        if k == "map":
            self.visit(self.u64(t + 48))
            return self.visit(self.u64(t + 56))
        if k != "struct":
            return
        key = self.pkg_path(t) + "." + self.type_name(t)
        if key in self.structs:
            return
        fields = []
        self.structs[key] = fields
        start, count = self.u64(t + 56), self.u64(t + 64)
        for i in range(count):
            f = start + 24 * i
            text, tag, flags = self.name(self.u64(f))
            fields.append({"name": text, "tag": tag, "embedded": bool(flags & 8),
                           "type": self.describe(self.u64(f + 8))})

    def walk(self):
        tl = self.secs[".typelink"]
        for i in range(tl[5] // 4):
            off = struct.unpack_from("<i", self.data, tl[4] + 4 * i)[0]
            try:
                self.visit(self.base + off)
            except (ValueError, UnicodeDecodeError, struct.error, IndexError):
                pass
        return self.structs


def short(key):
    pkg, _, name = key.rpartition(".")
    pkg = pkg.replace("k8s.io/api/", "").replace("k8s.io/apimachinery/pkg/apis/", "")
    return pkg + "." + name


def main():
    types = GoBinary(sys.argv[1]).walk()
    order = []

    def tyname(d):
        k = d["k"]
        if k == "ptr":
            return "*" + tyname(d["elem"])
        if k == "slice":
            return "bytes" if d["elem"]["k"] == "uint8" else "[]" + tyname(d["elem"])
        if k == "map":
            assert d["key"]["k"] == "string", d
            return "{}" + tyname(d["elem"])
        if k == "struct":
            if d["name"] in SPECIAL:
                return SPECIAL[d["name"]]
            visit(d["name"])
            return short(d["name"])
        return SCALAR[k]

    def visit(key):
        if key in order:
            return
        order.append(key)
        for f in types[key]:
            if re.search(r'protobuf:"\w', f["tag"]):
                tyname(f["type"])

    for _, _, root in ROOTS:
        visit(root)
    out = ["# Generated by gen_schema.py from the Go types of k8s.io/api (kubectl v1.32).",
           "# kind <apiVersion> <kind> <message>",
           "# type <message>, then one line a field: <number> <json name or . for inline>",
           "#   <type> [o: omitempty] [go=<Go field name>]; *T pointer, []T list, {}T map"]
    out += [f"kind {av} {kind} {short(root)}" for av, kind, root in ROOTS]
    for key in order:
        out.append(f"type {short(key)}")
        for f in types[key]:
            m = re.search(r'protobuf:"(\w+),(\d+)', f["tag"])
            j = re.search(r'json:"([^"]*)"', f["tag"])
            jname, _, opts = (j.group(1) if j else "").partition(",")
            if not m or jname == "-":
                continue
            assert m.group(1) in ("bytes", "varint"), f["tag"]
            if jname == "":
                jname = "." if f["embedded"] else f["name"]
            line = f" {m.group(2)} {jname} {tyname(f['type'])}"
            if "omitempty" in opts.split(","):
                line += " o"
            if jname == "." or f["name"] != jname[:1].upper() + jname[1:]:
                line += f" go={f['name']}"
            out.append(line)
    with open(sys.argv[2], "w") as fh:
        fh.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
