// `mlk bench --plot FILE.png` (bench/png_plot.h): the plot's SVG rendered by
// librsvg is a PNG of the SVG's size, decodable (cairo reads it back), with
// the bars in their series' colours on a white page; a document librsvg
// cannot read is an error naming it.
#include <cairo.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "bench/png_plot.h"
#include "bench/svg_plot.h"

namespace mlk::bench {
namespace {

struct Reader {
  const std::string& bytes;
  size_t at = 0;
};

cairo_status_t read_some(void* closure, unsigned char* data, unsigned int n) {
  auto* r = static_cast<Reader*>(closure);
  if (r->at + n > r->bytes.size()) return CAIRO_STATUS_READ_ERROR;
  std::memcpy(data, r->bytes.data() + r->at, n);
  r->at += n;
  return CAIRO_STATUS_SUCCESS;
}

uint32_t be32(const std::string& s, size_t at) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(s[at + i])); };
  return b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
}

int attr(const std::string& svg, const std::string& name) {
  size_t at = svg.find(" " + name + "=\"");
  return at == std::string::npos ? -1 : std::stoi(svg.substr(at + name.size() + 3));
}

TEST(PngPlot, TheSpeedupChartAsAPngOfItsSize) {
  std::vector<PlotRow> rows = {{"sgemm [M=64]", {2.0, 0.5}, {}}, {"layernorm <&>", {4.0, std::nullopt}, {"", "n/a"}}};
  std::string svg = speedup_svg("title", "subtitle", {"default", "openblas"}, rows);
  auto png = svg_to_png(svg);
  ASSERT_TRUE(png.ok()) << png.status().message();
  // The signature, and IHDR first with the SVG's width and height.
  ASSERT_GT(png->size(), 33u);
  EXPECT_EQ(png->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(png->substr(12, 4), "IHDR");
  const int w = attr(svg, "width"), h = attr(svg, "height");
  ASSERT_GT(w, 100);
  ASSERT_GT(h, 100);
  EXPECT_EQ(be32(*png, 16), static_cast<uint32_t>(w));
  EXPECT_EQ(be32(*png, 20), static_cast<uint32_t>(h));

  // Decoded: mostly white, with the two series' colours (#0072B2, #E69F00) and black text.
  Reader reader{*png};
  cairo_surface_t* s = cairo_image_surface_create_from_png_stream(&read_some, &reader);
  ASSERT_EQ(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
  ASSERT_EQ(cairo_image_surface_get_width(s), w);
  const unsigned char* data = cairo_image_surface_get_data(s);
  const int stride = cairo_image_surface_get_stride(s);
  std::map<uint32_t, int> counts;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint32_t px;
      std::memcpy(&px, data + y * stride + x * 4, 4);
      ++counts[px & 0xffffff];  // cairo's ARGB32, native endian: 0xAARRGGBB
    }
  cairo_surface_destroy(s);
  const double total = static_cast<double>(w) * h;
  EXPECT_GT(counts[0xffffff] / total, 0.7) << "a white page";
  EXPECT_LT(counts[0xffffff] / total, 0.99) << "with something drawn on it";
  EXPECT_GT(counts[0x0072B2], 200) << "the bars of the first series";
  EXPECT_GT(counts[0xE69F00], 100) << "the bar of the second series";
  EXPECT_GT(counts.size(), 10u) << "anti-aliased text";
}

TEST(PngPlot, ADocumentLibrsvgCannotReadIsAnError) {
  auto png = svg_to_png("<svg xmlns=\"http://www.w3.org/2000/svg\"");
  ASSERT_FALSE(png.ok());
  EXPECT_EQ(png.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(png.status().message().rfind("librsvg cannot read the plot's SVG: ", 0), 0u) << png.status().message();
  png = svg_to_png("<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>");
  ASSERT_FALSE(png.ok());
  EXPECT_EQ(png.status().message(), "the plot's SVG has no width and height in pixels");
}

}  // namespace
}  // namespace mlk::bench
