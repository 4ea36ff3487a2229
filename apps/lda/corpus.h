// Documents as word-id sequences, read from the app's text format.
//
// A corpus file holds one document per line: the word ids of its tokens in reading order,
// separated by spaces (an empty line is an empty document). A vocabulary file holds one word
// per line (its id is the line number, from 0), optionally followed by a tab and the word's
// frequency in the training corpus. scripts/text_to_lda.py writes both from plain text.
#ifndef PS_APPS_LDA_CORPUS_H_
#define PS_APPS_LDA_CORPUS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace lda {

/// Documents in compressed rows: document d's tokens are words[offsets[d], offsets[d + 1]).
struct Corpus {
  std::vector<uint64_t> offsets{0};
  std::vector<uint32_t> words;

  size_t docs() const { return offsets.size() - 1; }
  size_t tokens() const { return words.size(); }
  size_t length(size_t d) const { return offsets[d + 1] - offsets[d]; }
  /// Appends one document.
  void Add(const uint32_t* w, size_t n);
  /// Documents [begin, end) as a corpus of their own.
  Corpus Slice(size_t begin, size_t end) const;
};

/// Reads a corpus file. Throws std::runtime_error naming the file and line of the first token
/// that is not a word id below num_words (num_words = 0: any id). Every token is checked, but
/// when `keep` is set only the documents it keeps are stored: the others read as empty, so a
/// worker holds its own documents, not the corpus. *tokens (when set): the file's tokens.
Corpus ReadCorpus(const std::string& path, uint32_t num_words = 0,
                  const std::function<bool(uint64_t)>& keep = nullptr, uint64_t* tokens = nullptr);
/// Number of documents (lines) of a corpus file.
uint64_t CountDocs(const std::string& path);
/// Reads a corpus file in batches of up to batch_docs documents: f(index of the batch's first
/// document, the batch). Memory: one batch. Errors as ReadCorpus's.
void ForEachBatch(const std::string& path, uint32_t num_words, uint64_t batch_docs,
                  const std::function<void(uint64_t, const Corpus&)>& f);

/// The vocabulary: words and their training frequencies (0 when the file gives none).
struct Vocab {
  std::vector<std::string> words;
  std::vector<uint64_t> freq;
  uint32_t size() const { return static_cast<uint32_t>(words.size()); }
};
/// Reads a vocabulary file; throws std::runtime_error naming the file and line of a bad entry.
Vocab ReadVocab(const std::string& path);

/// Word frequencies counted from a corpus (for a vocabulary without them).
std::vector<uint64_t> CountWords(const Corpus& c, uint32_t num_words);

}  // namespace lda

#endif  // PS_APPS_LDA_CORPUS_H_
