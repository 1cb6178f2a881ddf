"""Preflight's copy of the hub's `metadata.json` parser (`kernels._rust.Metadata`):
what it accepts, with serde's wording (without its line and column): fields
checked in document order, then the missing required ones in the order the
hub declares them. Unknown keys are ignored. Pure: no imports beyond `json`
(tests/oracle/hub_metadata.py holds it against the real parser).

Works on Python 3.8+.
"""

import json

REQUIRED = ("name", "id", "version", "license", "python-depends", "backend")
BACKENDS = ("cann", "cpu", "cuda", "metal", "neuron", "rocm", "tpu", "xpu")
LOWER = "abcdefghijklmnopqrstuvwxyz"
HEX = "0123456789abcdefABCDEF"


def is_kernel_name(name):
    """`[a-z][a-z0-9-]*[a-z0-9]` (without `re`: a probe pays for every import)."""
    return (
        len(name) >= 2
        and name[0] in LOWER
        and name[-1] in LOWER + "0123456789"
        and all(c in LOWER + "0123456789-" for c in name)
    )


def is_git_id(sha):
    return len(sha) in (40, 64) and all(c in HEX for c in sha)


class Invalid(Exception):
    pass


def parse_metadata(raw):
    """(data, None) when the hub's parser would accept `raw`, else (None, why)."""
    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=no_duplicates)
        expect_map(data, "struct Metadata")
        fields(
            data,
            {
                "name": kernel_name,
                "id": string,
                "version": usize,
                "kernels-minver": optional(minver),
                "license": string,
                "upstream": optional(string),
                "source": optional(string),
                "python-depends": sequence(string),
                "kernel-depends": sequence(kernel_dependency),
                "backend": backend_info,
                "digest": optional(digest),
                "provenance": optional(provenance),
            },
            REQUIRED,
        )
    except Invalid as e:
        return None, str(e)
    except ValueError as e:  # JSON syntax, UTF-8
        return None, str(e)
    return data, None


def no_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise Invalid("duplicate field `%s`" % key)
        seen[key] = value
    return seen


def unexpected(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean `%s`" % ("true" if value else "false")
    if isinstance(value, int):
        return "integer `%d`" % value
    if isinstance(value, float):
        return "floating point `%r`" % value
    if isinstance(value, str):
        return "string %s" % json.dumps(value)
    if isinstance(value, list):
        return "sequence"
    return "map"


def invalid_type(value, expected):
    return Invalid("invalid type: %s, expected %s" % (unexpected(value), expected))


def expect_map(value, expected):
    if not isinstance(value, dict):
        raise invalid_type(value, expected)


def fields(data, checks, required, known_only=False):
    for key, value in data.items():
        check = checks.get(key)
        if check is not None:
            check(value)
        elif known_only:
            raise Invalid(
                "unknown field `%s`, expected one of %s" % (key, ", ".join("`%s`" % k for k in checks))
            )
    for key in required:
        if key not in data:
            raise Invalid("missing field `%s`" % key)


def string(value):
    if not isinstance(value, str):
        raise invalid_type(value, "a string")


def usize(value):
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise Invalid("invalid value: integer `%d`, expected usize" % value)
        return
    raise invalid_type(value, "usize")


def optional(check):
    def inner(value):
        if value is not None:
            check(value)

    return inner


def sequence(check):
    def inner(value):
        if not isinstance(value, list):
            raise invalid_type(value, "a sequence")
        for item in value:
            check(item)

    return inner


def kernel_name(value):
    string(value)
    if not is_kernel_name(value):
        raise Invalid(
            "Invalid kernel name `%s`. Name must:\n"
            "- Start with a lowercase letter (a-z)\n"
            "- Contain only lowercase letters, digits, and dashes\n"
            "- End with a lowercase letter or digit\n"
            "- Be at least 2 characters long\n"
            "Examples: `my-kernel`, `relu2d`, `flash-attention`" % value
        )


def minver(value):
    string(value)
    parts = value.split(".")
    if not all(p.isdigit() and p.isascii() for p in parts):
        raise Invalid("Version must consist of numbers: %s" % value)
    if len(parts) != 3:
        raise Invalid("Version has %d components, expected 3" % len(parts))


def kernel_dependency(value):
    expect_map(value, "struct KernelDependencyRepr")
    fields(value, {"repo-id": string, "version": usize, "revision": string}, ("repo-id",), known_only=True)
    if "version" not in value and "revision" not in value:
        raise Invalid("either `version` or `revision` must be specified")


def backend_info(value):
    expect_map(value, "struct BackendInfo")

    def kind(v):
        string(v)
        if v not in BACKENDS:
            raise Invalid(
                "unknown variant `%s`, expected one of %s" % (v, ", ".join("`%s`" % b for b in BACKENDS))
            )

    fields(value, {"type": kind, "archs": optional(sequence(string))}, ("type",))


def digest(value):
    expect_map(value, "struct Digest")

    def algorithm(v):
        string(v)
        if v not in ("sha256", "sha512"):
            raise Invalid("unknown variant `%s`, expected `sha256` or `sha512`" % v)

    def files(v):
        expect_map(v, "a map")
        for item in v.values():
            string(item)

    fields(value, {"algorithm": algorithm, "files": files}, ("algorithm", "files"))


def git_status(value, required):
    def sha(v):
        string(v)
        if not is_git_id(v):
            raise Invalid("Invalid git object id, expected 40 or 64 hexadecimal digits: %s" % v)

    def dirty(v):
        if not isinstance(v, bool):
            raise invalid_type(v, "a boolean")

    fields(value, {"sha": sha, "dirty": dirty}, required)


def provenance(value):
    expect_map(value, "struct Provenance")

    def builder(v):
        expect_map(v, "struct KernelBuilderVersion")
        fields(v, {"version": string}, ("version",))
        git_status({k: v[k] for k in ("sha", "dirty") if k in v}, ())
        if ("sha" in v) != ("dirty" in v):
            raise Invalid("git commit and dirty must be specified together")

    def kernel(v):
        expect_map(v, "struct GitStatus")
        git_status(v, ("sha", "dirty"))

    fields(value, {"kernel-builder": builder, "kernel": optional(kernel)}, ("kernel-builder",))
