"""Offline stand-in for rules_java: the native Java rules under their Starlark names.

Bazel 4.2's own @bazel_tools packages load these; tfdptext builds no Java.
"""

def java_binary(**kwargs):
    native.java_binary(**kwargs)

def java_import(**kwargs):
    native.java_import(**kwargs)

def java_library(**kwargs):
    native.java_library(**kwargs)

def java_runtime(**kwargs):
    native.java_runtime(**kwargs)

def java_toolchain(**kwargs):
    native.java_toolchain(**kwargs)
