// The one source of pinpool_test_pch (tests/CMakeLists.txt), the target that builds the test
// programs' shared precompiled header; its object is linked into nothing.
