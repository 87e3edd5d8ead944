"""Every metric a task may name, registered on import: `import computerrl.envs.tasks.metrics`.

| module | metrics |
|---|---|
| metrics_basic | compare_text_file, check_include_exclude, exact_match, infeasible |
| metrics_table | compare_table (rules in TABLE_RULES), compare_csv |
| metrics_table_objects | compare_table's chart, pivot_table, filter, data_validation, sheet_print rules |
| metrics_table_styles | compare_table's style rule (cell styles with conditional formats applied) |
| metrics_docs | compare_docx_files, compare_pptx_files |
| metrics_office_world | compare_spreadsheet, simple_docx_compare, simple_pptx_compare |
| metrics_chrome | Chrome's (is_expected_tabs, …), OSWorld's general rule metrics (check_direct_json_object, …) |
| metrics_vlc | VLC's (is_vlc_playing, the vlcrc checks, is_vlc_fullscreen) |
| metrics_media | compare_images, compare_pdfs |
| metrics_apps | GIMP's, Thunderbird's, OSWorld's general file metrics (check_json, check_csv, …) |
| metrics_docs_format | Writer's and Impress's formatting and settings (compare_line_spacing, check_tabstops, …) |
| metrics_vscode | VS Code's settings, keybindings and extensions |
| metrics_a11y | the desktop's accessibility tree (check_accessibility_tree, check_left_panel) |
| metrics_files | whole files: archives (compare_archive, …), HTML, EPUB, images in PDFs and .docx, MP3 tags |
"""

from computerrl.envs.tasks import (metrics_a11y, metrics_apps, metrics_basic, metrics_chrome, metrics_docs,  # noqa: F401
                                  metrics_docs_format, metrics_files, metrics_media, metrics_office_world,
                                  metrics_table, metrics_table_objects, metrics_table_styles, metrics_vlc,
                                  metrics_vscode)
from computerrl.envs.tasks.metrics_table import TABLE_RULES, check_table_rules  # noqa: F401
