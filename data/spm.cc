// SentencePiece behind the C interface of data/spm_internal.h: the one C++ file of
// lookback. It only forwards to libsentencepiece (processor) and libsentencepiece_train
// (trainer); every decision about corpora stays in data/text.c.
#include "data/spm_internal.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

namespace sentencepiece {
namespace logging {
// Exported by libsentencepiece (common.h, not installed): the level below which its
// trainer's progress lines on standard error are dropped (2 = errors only).
int GetMinLogLevel();
void SetMinLogLevel(int level);
} // namespace logging
} // namespace sentencepiece

struct lb_spm {
    sentencepiece::SentencePieceProcessor processor;
    int model_type;
};

namespace {

void set_error(char *err, size_t size, const std::string &what)
{
    if (!err || size == 0)
        return;
    // SentencePiece's messages begin with the source location "file.cc(123) [check] ":
    // the reader needs what follows.
    std::string text = what;
    size_t bracket = text.find("] ");
    if (text.find(".cc(") != std::string::npos && bracket != std::string::npos)
        text = text.substr(bracket + 2);
    for (char &c : text)
        if (c == '\n')
            c = ' ';
    std::snprintf(err, size, "%s", text.c_str());
}

// Reads a protobuf varint at p[0..n); 0 when it does not fit.
size_t read_varint(const unsigned char *p, size_t n, uint64_t *value)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n && i < 10; i++) {
        v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *value = v;
            return i + 1;
        }
    }
    return 0;
}

// The value of varint field `field` of the message at p[0..n), or of length-delimited
// field `field` (its bytes in *sub): 1 when found.
int find_field(const unsigned char *p, size_t n, uint64_t field, uint64_t *value, const unsigned char **sub,
               size_t *sub_len)
{
    for (size_t pos = 0; pos < n;) {
        uint64_t key = 0, v = 0;
        size_t k = read_varint(p + pos, n - pos, &key);
        if (!k)
            return 0;
        pos += k;
        uint64_t wire = key & 7;
        if (wire == 0) {
            if (!(k = read_varint(p + pos, n - pos, &v)))
                return 0;
            pos += k;
            if ((key >> 3) == field && value) {
                *value = v;
                return 1;
            }
        } else if (wire == 2) {
            if (!(k = read_varint(p + pos, n - pos, &v)) || v > n - pos - k)
                return 0;
            pos += k;
            if ((key >> 3) == field && sub) {
                *sub = p + pos;
                *sub_len = (size_t)v;
                return 1;
            }
            pos += (size_t)v;
        } else if (wire == 1 || wire == 5) {
            pos += wire == 1 ? 8 : 4;
        } else {
            return 0;
        }
    }
    return 0;
}

// ModelProto.trainer_spec (field 2) .model_type (field 3); UNIGRAM when absent.
int model_type_of(const std::string &proto)
{
    const unsigned char *spec = nullptr;
    size_t spec_len = 0;
    uint64_t type = LB_SPM_UNIGRAM;
    if (find_field((const unsigned char *)proto.data(), proto.size(), 2, nullptr, &spec, &spec_len))
        find_field(spec, spec_len, 3, &type, nullptr, nullptr);
    return (int)type;
}

// The training sentences: the lines of the text, long ones cut into parts.
class text_sentences : public sentencepiece::SentenceIterator {
  public:
    text_sentences(const char *text, size_t len) : text_(text), len_(len) { Next(); }
    bool done() const override { return finished_; }
    const std::string &value() const override { return value_; }
    sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }
    void Next() override
    {
        enum { MAX_PART = 2048 };
        for (;;) {
            if (pos_ >= len_) {
                finished_ = true;
                return;
            }
            size_t end = pos_;
            while (end < len_ && text_[end] != '\n' && text_[end] != '\x03' && end - pos_ < MAX_PART)
                end++;
            size_t next = end;
            if (end < len_ && text_[end] != '\n' && text_[end] != '\x03') { // cut a long line before a space
                size_t cut = end;
                while (cut > pos_ + MAX_PART / 2 && text_[cut] != ' ')
                    cut--;
                if (text_[cut] != ' ') // no space: between characters
                    for (cut = end; cut > pos_ && ((unsigned char)text_[cut] & 0xC0) == 0x80; cut--) {
                    }
                end = next = cut > pos_ ? cut : end;
            } else if (end < len_) {
                next = end + 1; // past the newline (or the document separator U+0003)
            }
            value_.assign(text_ + pos_, end - pos_);
            pos_ = next;
            if (!value_.empty())
                return;
        }
    }

  private:
    const char *text_;
    size_t len_, pos_ = 0;
    std::string value_;
    bool finished_ = false;
};

// The number after `marker` in message, or 0.
int64_t number_after(const std::string &message, const char *marker)
{
    size_t at = message.find(marker);
    return at == std::string::npos ? 0 : std::strtoll(message.c_str() + at + std::strlen(marker), nullptr, 10);
}

} // namespace

extern "C" {

lb_spm *lb_spm_load(const void *model, size_t n_bytes, char *err, size_t err_size)
{
    try {
        lb_spm *spm = new lb_spm;
        std::string proto((const char *)model, n_bytes);
        auto status = spm->processor.LoadFromSerializedProto(proto);
        if (!status.ok()) {
            set_error(err, err_size, status.ToString());
            delete spm;
            return nullptr;
        }
        spm->model_type = model_type_of(proto);
        return spm;
    } catch (const std::exception &e) {
        set_error(err, err_size, e.what());
        return nullptr;
    }
}

void lb_spm_free(lb_spm *spm) { delete spm; }

int64_t lb_spm_size(const lb_spm *spm) { return spm->processor.GetPieceSize(); }
int64_t lb_spm_unk_id(const lb_spm *spm) { return spm->processor.unk_id(); }
int64_t lb_spm_bos_id(const lb_spm *spm) { return spm->processor.bos_id(); }
int64_t lb_spm_eos_id(const lb_spm *spm) { return spm->processor.eos_id(); }
int lb_spm_model_type(const lb_spm *spm) { return spm->model_type; }

lb_spm_piece_type lb_spm_piece_kind(const lb_spm *spm, int64_t id)
{
    const auto &p = spm->processor;
    int i = (int)id;
    if (p.IsUnknown(i))
        return LB_SPM_UNKNOWN;
    if (p.IsControl(i))
        return LB_SPM_CONTROL;
    if (p.IsByte(i))
        return LB_SPM_BYTE;
    if (p.IsUnused(i))
        return LB_SPM_UNUSED;
    return LB_SPM_NORMAL;
}

const char *lb_spm_piece(const lb_spm *spm, int64_t id, size_t *len)
{
    const std::string &piece = spm->processor.IdToPiece((int)id);
    *len = piece.size();
    return piece.data();
}

int lb_spm_encode(const lb_spm *spm, const char *text, size_t len, int32_t **ids, int64_t *n, char *err,
                  size_t err_size)
{
    *ids = nullptr;
    *n = 0;
    try {
        std::vector<int> out;
        auto status = spm->processor.Encode(std::string_view(text ? text : "", len), &out);
        if (!status.ok()) {
            set_error(err, err_size, status.ToString());
            return -1;
        }
        if (!out.empty()) {
            *ids = (int32_t *)std::malloc(out.size() * sizeof(int32_t));
            if (!*ids) {
                set_error(err, err_size, "out of memory");
                return -1;
            }
            for (size_t i = 0; i < out.size(); i++)
                (*ids)[i] = out[i];
        }
        *n = (int64_t)out.size();
        return 0;
    } catch (const std::exception &e) {
        set_error(err, err_size, e.what());
        return -1;
    }
}

int lb_spm_decode(const lb_spm *spm, const int32_t *ids, int64_t n, char **text, size_t *len, char *err,
                  size_t err_size)
{
    *text = nullptr;
    try {
        std::vector<int> in(ids, ids + n);
        std::string out;
        auto status = spm->processor.Decode(in, &out);
        if (!status.ok()) {
            set_error(err, err_size, status.ToString());
            return -1;
        }
        *text = (char *)std::malloc(out.size() + 1);
        if (!*text) {
            set_error(err, err_size, "out of memory");
            return -1;
        }
        std::memcpy(*text, out.data(), out.size());
        (*text)[out.size()] = '\0';
        *len = out.size();
        return 0;
    } catch (const std::exception &e) {
        set_error(err, err_size, e.what());
        return -1;
    }
}

int lb_spm_train(const lb_spm_train_options *opt, const char *text, size_t len, void **model, size_t *n_bytes,
                 int64_t *lowest, int64_t *highest, char *err, size_t err_size)
{
    *model = nullptr;
    *n_bytes = 0;
    *lowest = *highest = 0;
    try {
        char args[1024];
        std::snprintf(args, sizeof args,
                      "--model_type=%s --vocab_size=%lld --character_coverage=%.17g --byte_fallback=true "
                      "--normalization_rule_name=identity --add_dummy_prefix=false --remove_extra_whitespaces=false "
                      "--split_digits=false --max_sentence_length=4096 --num_threads=%d --unk_id=0 --bos_id=1 "
                      "--eos_id=2 --pad_id=-1 --model_prefix=",
                      opt->type, (long long)opt->vocab_size, opt->character_coverage,
                      opt->threads > 0 ? opt->threads : 1);
        sentencepiece::SetRandomGeneratorSeed(opt->seed);
        text_sentences sentences(text, len);
        std::string proto;
        int level = sentencepiece::logging::GetMinLogLevel();
        sentencepiece::logging::SetMinLogLevel(2);
        auto status = sentencepiece::SentencePieceTrainer::Train(args, &sentences, &proto);
        sentencepiece::logging::SetMinLogLevel(level);
        if (!status.ok()) {
            std::string message = status.ToString();
            *highest = number_after(message, "set it to a value <= ");
            if (message.find("smaller than required_chars") != std::string::npos)
                *lowest = number_after(message, " vs ");
            set_error(err, err_size, message);
            return -1;
        }
        *model = std::malloc(proto.size() > 0 ? proto.size() : 1);
        if (!*model) {
            set_error(err, err_size, "out of memory");
            return -1;
        }
        std::memcpy(*model, proto.data(), proto.size());
        *n_bytes = proto.size();
        return 0;
    } catch (const std::exception &e) {
        set_error(err, err_size, e.what());
        return -1;
    }
}

} // extern "C"
