// simt/detail/symbol.hpp -- the name of a kernel from its address, for the launch errors that must name it.
// Kernels usually have internal linkage (anonymous namespaces, templates), so they are not among the dynamic
// symbols dladdr reads; the ELF symbol table (.symtab) of the file that holds the address has them unless the
// file is stripped. Read only on an error path.
#pragma once
#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace simt::detail {

inline std::string demangle(const char* mangled) {
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 ? std::string(name.get()) : std::string(mangled);
}

// The demangled name of the function symbol at `offset` (its st_value) in the ELF file `path`; "" if none.
inline std::string elf_function_at(const char* path, std::uint64_t offset) {
  std::ifstream f(path, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!f.read(reinterpret_cast<char*>(&eh), sizeof eh) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      std::string(reinterpret_cast<const char*>(eh.e_ident), 4) != ELFMAG || eh.e_shentsize != sizeof(Elf64_Shdr))
    return "";
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  f.seekg(std::streamoff(eh.e_shoff));
  if (!f.read(reinterpret_cast<char*>(sh.data()), std::streamsize(sh.size() * sizeof(Elf64_Shdr)))) return "";
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_SYMTAB || s.sh_link >= sh.size()) continue;
    std::vector<Elf64_Sym> syms(s.sh_size / sizeof(Elf64_Sym));
    f.seekg(std::streamoff(s.sh_offset));
    if (!f.read(reinterpret_cast<char*>(syms.data()), std::streamsize(syms.size() * sizeof(Elf64_Sym)))) return "";
    for (const Elf64_Sym& y : syms) {
      if (ELF64_ST_TYPE(y.st_info) != STT_FUNC || y.st_value != offset) continue;
      f.seekg(std::streamoff(sh[s.sh_link].sh_offset + y.st_name));
      std::string name;
      std::getline(f, name, '\0');
      return demangle(name.c_str());
    }
  }
  return "";
}

// The demangled name of the function at `address`, "" where no symbol table names it.
inline std::string function_name(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0) return "";
  const auto at = reinterpret_cast<std::uintptr_t>(address), base = reinterpret_cast<std::uintptr_t>(info.dli_fbase);
  for (const char* path : {info.dli_fname, "/proc/self/exe"}) {
    if (path == nullptr || *path == '\0') continue;
    // A position-independent file's symbols are offsets from its load address, a fixed-address one's addresses.
    for (const std::uint64_t v : {std::uint64_t(at - base), std::uint64_t(at)})
      if (std::string name = elf_function_at(path, v); !name.empty()) return name;
  }
  return "";
}

}  // namespace simt::detail
