// Runs the kernels of kernels.metal on the CPU for TestMSLOnHostCompiler.
// Requests arrive on stdin, little-endian: u32 name length (0 ends), the
// name, the 24-byte Params, u64 length and bytes of d, u64 length and bytes
// of s. The reply on stdout is d after the kernel ran over p.n threads.
#include <metal_stdlib>

#include "kernels.metal"

#include <cstdio>
#include <map>
#include <string>
#include <vector>

typedef void (*runner)(void* d, const void* s, Params& p);

static const std::map<std::string, runner> kernels = {
#include "table.inc"
};

static bool readAll(void* p, size_t n) { return n == 0 || fread(p, 1, n, stdin) == n; }

int main() {
    static_assert(sizeof(Params) == 24, "Params is 24 bytes");
    for (;;) {
        uint32_t len;
        if (!readAll(&len, 4) || len == 0) return 0;
        std::string name(len, '\0');
        Params p;
        uint64_t dn, sn;
        if (!readAll(&name[0], len) || !readAll(&p, sizeof p) || !readAll(&dn, 8)) return 1;
        std::vector<unsigned char> d(dn + 8), s;
        if (!readAll(d.data(), dn) || !readAll(&sn, 8)) return 1;
        s.resize(sn + 8);
        if (!readAll(s.data(), sn)) return 1;
        auto k = kernels.find(name);
        if (k == kernels.end()) {
            fprintf(stderr, "no kernel %s\n", name.c_str());
            return 2;
        }
        k->second(d.data(), s.data(), p);
        if (fwrite(d.data(), 1, dn, stdout) != dn) return 1;
        fflush(stdout);
    }
}
