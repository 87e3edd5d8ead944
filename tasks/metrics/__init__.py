"""Every metric a task may name, registered on import: `import computerrl.tasks.metrics`.

| module | metrics |
|---|---|
| basic | compare_text_file, check_include_exclude, exact_match, infeasible, check_text_enlarged, is_in_vm_clickboard |
| table | compare_table (rules in TABLE_RULES), compare_csv |
| table_objects | compare_table's chart, pivot_table, filter, data_validation, sheet_print rules |
| table_styles | compare_table's style rule (cell styles with conditional formats applied) |
| docs | compare_docx_files, compare_pptx_files |
| docs_lines | Writer read as words and lines: fuzzy_place_math, compare_unique_train_records |
| slides_colors | Impress colours: evaluate_presentation_fill_to_rgb_distance, check_page_number_colors |
| office_world | compare_spreadsheet, simple_docx_compare, simple_pptx_compare |
| chrome | Chrome's (is_expected_tabs, …), OSWorld's general rule metrics (check_direct_json_object, …) |
| vlc | VLC's (is_vlc_playing, the vlcrc checks, is_vlc_fullscreen) |
| media | compare_images, compare_pdfs |
| audio_video | compare_audios (MFCCs aligned by FastDTW), compare_videos (frames by perceptual hash), contains_mp4_video |
| apps | GIMP's, Thunderbird's, OSWorld's general file metrics (check_json, check_csv, …) |
| docs_format | Writer's and Impress's formatting and settings (compare_line_spacing, check_tabstops, …) |
| vscode | VS Code's settings, keybindings and extensions |
| a11y | the desktop's accessibility tree (check_accessibility_tree, check_left_panel) |
| files | whole files: archives (compare_archive, …), HTML, EPUB, images in PDFs and .docx, MP3 tags |
"""

from computerrl.tasks.metrics import (a11y, apps, audio_video, basic, chrome, docs,  # noqa: F401
                                          docs_format, docs_lines, files, media, office_world, slides_colors,
                                          table, table_objects, table_styles, vlc, vscode)
from computerrl.tasks.metrics.table import TABLE_RULES, check_table_rules  # noqa: F401
