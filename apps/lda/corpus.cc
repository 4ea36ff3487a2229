#include "lda/corpus.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace lda {

void Corpus::Add(const uint32_t* w, size_t n) {
  words.insert(words.end(), w, w + n);
  offsets.push_back(words.size());
}

Corpus Corpus::Slice(size_t begin, size_t end) const {
  Corpus c;
  for (size_t d = begin; d < end && d < docs(); ++d) c.Add(&words[offsets[d]], length(d));
  return c;
}

namespace {

// Reads path's documents one by one: add(words) per line; errors name the file and line.
void ReadDocs(const std::string& path, uint32_t num_words,
              const std::function<void(std::vector<uint32_t>*)>& add) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::string line;
  std::vector<uint32_t> doc;
  for (size_t no = 1; std::getline(in, line); ++no) {
    doc.clear();
    const char* p = line.c_str();
    while (*p) {
      while (*p == ' ' || *p == '\t' || *p == '\r') ++p;
      if (!*p) break;
      char* end = nullptr;
      errno = 0;
      const unsigned long long id = std::strtoull(p, &end, 10);
      if (end == p || (*end && *end != ' ' && *end != '\t' && *end != '\r') || errno || *p == '-' ||
          id > UINT32_MAX - 1 || (num_words && id >= num_words)) {
        std::string tok(p, static_cast<size_t>(std::strcspn(p, " \t\r")));
        throw std::runtime_error(
            path + ":" + std::to_string(no) + ": \"" + tok + "\" is not a word id" +
            (num_words ? " below the vocabulary size " + std::to_string(num_words) : ""));
      }
      doc.push_back(static_cast<uint32_t>(id));
      p = end;
    }
    add(&doc);
  }
  if (in.bad()) throw std::runtime_error(path + ": read error");
}

}  // namespace

Corpus ReadCorpus(const std::string& path, uint32_t num_words,
                  const std::function<bool(uint64_t)>& keep, uint64_t* tokens) {
  Corpus c;
  uint64_t all_tokens = 0;
  ReadDocs(path, num_words, [&](std::vector<uint32_t>* doc) {
    all_tokens += doc->size();
    if (keep && !keep(c.docs())) doc->clear();
    c.Add(doc->data(), doc->size());
  });
  if (tokens) *tokens = all_tokens;
  return c;
}

void ForEachBatch(const std::string& path, uint32_t num_words, uint64_t batch_docs,
                  const std::function<void(uint64_t, const Corpus&)>& f) {
  Corpus batch;
  uint64_t first = 0;
  ReadDocs(path, num_words, [&](std::vector<uint32_t>* doc) {
    batch.Add(doc->data(), doc->size());
    if (batch.docs() >= std::max<uint64_t>(1, batch_docs)) {
      f(first, batch);
      first += batch.docs();
      batch = Corpus();
    }
  });
  if (batch.docs() > 0) f(first, batch);
}

uint64_t CountDocs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  uint64_t lines = 0;
  char last = '\n';
  std::vector<char> buf(1 << 16);
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
    const size_t n = static_cast<size_t>(in.gcount());
    lines += static_cast<uint64_t>(std::count(buf.data(), buf.data() + n, '\n'));
    last = buf[n - 1];
  }
  if (in.bad()) throw std::runtime_error(path + ": read error");
  return lines + (last != '\n');  // a last line without its newline (getline reads it too)
}

Vocab ReadVocab(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  Vocab v;
  std::string line;
  for (size_t no = 1; std::getline(in, line); ++no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t tab = line.find('\t');
    std::string word = line.substr(0, tab);
    if (word.empty()) throw std::runtime_error(path + ":" + std::to_string(no) + ": empty word");
    uint64_t f = 0;
    if (tab != std::string::npos) {
      char* end = nullptr;
      const char* s = line.c_str() + tab + 1;
      f = std::strtoull(s, &end, 10);
      if (end == s || *end) {
        throw std::runtime_error(path + ":" + std::to_string(no) + ": the frequency \"" +
                                 std::string(s) + "\" is not a count");
      }
    }
    v.words.push_back(std::move(word));
    v.freq.push_back(f);
  }
  return v;
}

std::vector<uint64_t> CountWords(const Corpus& c, uint32_t num_words) {
  std::vector<uint64_t> f(num_words, 0);
  for (uint32_t w : c.words) {
    if (w < num_words) f[w]++;
  }
  return f;
}

}  // namespace lda
